// The terminals a Lark grammar can take with `%import common.NAME`, written here in Lark itself (each states
// the language of Lark's own common.lark terminal of that name; ESCAPED_STRING and C_COMMENT, which Lark
// writes with a lazy regex and a lookbehind, are written as the equivalent grammars).
export const LARK_COMMON = String.raw`
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
_STRING_ESC_INNER: (/[^"\\\n]/ | "\\" /[^\n]/)*
ESCAPED_STRING: "\"" _STRING_ESC_INNER "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" (/[^*]/ | "*"+ /[^*\/]/)* "*"+ "/"
SQL_COMMENT: /--[^\n]*/
`
