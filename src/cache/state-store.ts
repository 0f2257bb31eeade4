// What the prefix cache needs from a model: saved KV rows and recurrent states, whose bytes stay in the model, and
// (for the disk tier) those pieces as floats on the host. The native model implements it (src/native/native-model.ts).

/**
 * Saved sequence state for the prefix cache (the bytes stay in the model). Rows are KV positions
 * [start, start+n) of a sequence; a state is its recurrent (GDN + conv) state at its current length, or at a
 * length its last step kept (StepItem.snapshots).
 * restore() puts rows covering [0, len) and a state at len into a fresh sequence and says whether the
 * draft's context came back too (if not, the draft cannot run on that sequence).
 */
export interface StateStore {
  saveRows(seq: number, start: number, n: number): number
  /** The state at `length`: the sequence's length, or a length its last step kept (StepItem.snapshots). */
  saveState(seq: number, length: number): number
  restore(seq: number, rows: number[], state: number): boolean
  freeSaved(id: number): void
  /** The disk tier (absent: memory only): a saved piece's floats on the host, and a piece made from them. */
  exportSaved?(id: number): SavedPiece
  importSaved?(piece: SavedPiece): number
  /** Bytes of one KV position (target and draft) and of one saved state, for the cache's budget. */
  readonly rowBytes: number
  readonly stateBytes: number
}

/** Saved rows (n positions) or a saved state (at `length`) as floats on the host: the disk tier's unit. */
export type SavedPiece =
  | {kind: 'rows'; n: number; draft: boolean; data: Float32Array}
  | {kind: 'state'; length: number; draft: boolean; windowLength: number; data: Float32Array; window: Float32Array}
