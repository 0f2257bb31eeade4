// DOM helpers of the page: lookup by id, and an element builder.
export const $ = id => document.getElementById(id)
export const el = (tag, props = {}, ...children) => {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue
    if (k === 'class') node.className = v
    else if (k === 'text') node.textContent = v
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v)
    else node.setAttribute(k, v === true ? '' : String(v))
  }
  node.append(...children.filter(c => c !== null && c !== undefined && c !== false))
  return node
}
