import RichText
import SQLiteStore
import SyncModel

/// The replica name under which the broker itself edits a text: the splices it makes of a whole-text
/// `edit_block` from a client that predates the CRDT. Not a valid client id (`@`), so no device can use it; the
/// broker edits a block only inside the transaction that reads and writes its state, so its counters never clash.
let brokerTextClient = "@broker"
/// The replica name of a block's first text (`add_block`, or a block stored before the CRDT): every replica
/// derives the same ids from the same text.
let initialTextClient = ""

extension ApplyContext {
  /// The CRDT state of a live block of `page` (a block stored before the CRDT gets its text as first text), and
  /// the bytes its text, marks and state take now (`PageStore+Size.swift`). Unknown, deleted or elsewhere →
  /// `unknownBlock`. The state's and the text's bytes are the batch's work (`BatchWork.textBytesPerUnit`),
  /// charged before it is decoded.
  mutating func text(of block: EntityID, on page: EntityID) throws -> (
    document: TextDocument, storedBytes: Int
  ) {
    guard
      let row = try connection.query(
        """
        SELECT page_id, deleted, crdt, text,
          length(CAST(text AS BLOB)) + length(CAST(marks AS BLOB)) + coalesce(length(crdt), 0)
        FROM block WHERE id = ?
        """, [.text(block.rawValue)]
      ).first, row[0] == .text(page.rawValue), row[1] == .integer(0)
    else { throw Rejection(.unknownBlock) }
    // The state (its text deflated) is inflated, changed, deflated and written back: its size and the text's.
    let stateBytes = if case .blob(let state) = row[2] { state.count } else { 0 }
    let textBytes = if case .text(let text) = row[3] { text.utf8.count } else { 0 }
    try charge((stateBytes + textBytes) / BatchWork.textBytesPerUnit)
    let stored = if case .integer(let bytes) = row[4] { Int(bytes) } else { 0 }
    return (try PageStore.textDocument(crdt: row[2], text: row[3]), stored)
  }

  /// Applies a client's CRDT update to a block's text: checked first (its insert runs and mark operations are
  /// the batch client's own, its counters follow the client's last ones closely, the text stays within the
  /// limits), then written. An update whose origins the broker lacks waits in the state (`hasPendingOperations`)
  /// until they arrive; it is applied, not rejected.
  mutating func applyText(_ ops: TextOps, to block: EntityID, on page: EntityID) throws {
    _ = try writablePage(page)
    let current = try text(of: block, on: page)
    var document = current.document
    guard let update = try? ops.update() else { throw Rejection(.invalidValue) }
    let client = batch.client.rawValue
    for run in update.runs {
      guard run.client == client else { throw Rejection(.invalidValue) }
      // A counter far beyond the client's next would make the state hold a long gap for nothing.
      let next = UInt64(document.nextCounter(for: client))
      guard UInt64(run.counter) <= next + UInt64(store.limits.maxTextBytes) else {
        throw Rejection(.invalidValue)
      }
    }
    guard update.marks.allSatisfy({ $0.client == client }) else { throw Rejection(.invalidValue) }
    document.apply(update, seq: seq)
    let text = try checkedText(document, replacing: current.storedBytes)
    try grow(page, by: text.growth)
    try writeText(text, of: block, on: page)
  }

  /// A whole-text edit (`edit_block` with `text`) as the broker's own splices against the current text, checked
  /// and not written yet (`writeText`); nil when the text is unchanged.
  mutating func replacedText(of block: EntityID, on page: EntityID, with newText: String) throws
    -> CheckedText?
  {
    let current = try text(of: block, on: page)
    var document = current.document
    if document.replaceText(with: newText, client: brokerTextClient, seq: seq).isEmpty { return nil }
    return try checkedText(document, replacing: current.storedBytes)
  }

  /// A block's next text, state and marks, as they will be written.
  struct CheckedText {
    var text: String
    var marks: String
    var state: [UInt8]
    /// What the block's text, marks and state take more than before (negative: less).
    var growth: Int
  }

  /// A block's next state after the size checks, which throw before anything is written: the text within
  /// `maxTextBytes`, and what the state holds room for (characters deleted or not, counters skipped, runs
  /// waiting for their origins: `heldCharacters`) within `maxTextCharacters` and within what a state may hold
  /// (`TextDocument.maxIdentifiers`), so that a stored state always reads back. `stored`: the bytes the block's
  /// text, marks and state take now. The page's growth is the caller's to check (`grow`), with the mutation's
  /// other growth.
  func checkedText(_ document: TextDocument, replacing stored: Int) throws -> CheckedText {
    let text = document.text
    let held = document.heldCharacters
    guard text.utf8.count <= store.limits.maxTextBytes, held <= store.limits.maxTextCharacters,
      held <= TextDocument.maxIdentifiers
    else {
      throw Rejection(.tooLarge)
    }
    let marks = store.json(document.marks)
    let state = document.encoded()
    return CheckedText(
      text: text, marks: marks, state: state,
      growth: text.utf8.count + marks.utf8.count + state.count - stored)
  }

  /// Writes a block's checked state with its rendered text and marks.
  mutating func writeText(_ checked: CheckedText, of block: EntityID, on page: EntityID) throws {
    try connection.execute(
      "UPDATE block SET text = ?, marks = ?, crdt = ? WHERE id = ?",
      [.text(checked.text), .text(checked.marks), .blob(checked.state), .text(block.rawValue)])
    changes.record(page, "block:" + block.rawValue)
  }
}

extension PageStore {
  /// A block's CRDT state from its `crdt` column, or, for a block stored before the CRDT (NULL), its text as
  /// first text.
  static func textDocument(crdt: SQLiteValue, text: SQLiteValue) throws -> TextDocument {
    switch crdt {
    case .blob(let bytes):
      do throws(TextError) {
        return try TextDocument(encoded: bytes)
      } catch {
        throw PageStoreError.corruptText(error.description)
      }
    default:
      guard case .text(let text) = text else { return TextDocument() }
      return TextDocument(text: text, client: initialTextClient)
    }
  }

  /// Gives every block stored before the CRDT (`crdt` NULL) its state: its text as first text, the ids every
  /// device derives from the same text. Once, at open, after the migration that added the column.
  static func backfillTextStates(_ connection: any StoreConnection) throws {
    let rows = try connection.query("SELECT id, text FROM block WHERE crdt IS NULL")
    guard !rows.isEmpty else { return }
    try connection.transaction(writing: true) {
      for row in rows {
        guard case .text(let text) = row[1] else { continue }
        try connection.execute(
          "UPDATE block SET crdt = ? WHERE id = ?",
          [.blob(TextDocument(text: text, client: initialTextClient).encoded()), row[0]])
      }
    }
  }

  /// A block's CRDT for a reader: the whole state, or with `since` the update since then. A block everything of
  /// which is newer than `since` (added since) gets its whole state even so: a device has none of it, and keeps
  /// a block that arrives as an update without a state (`LocalStore.mergedText`: it cannot tell an update that
  /// holds everything from one that lacks what came before).
  static func crdt(_ column: SQLiteValue, text: SQLiteValue, since: UInt64?) -> TextOps? {
    // A whole state goes as stored: decoding it (and inflating its text) only to send the same bytes cost the
    // reader threads as much as writing the answer. The writer encoded it; only a damaged file could spoil it.
    if since == nil, case .blob(let bytes) = column { return TextOps(bytes: bytes) }
    guard let document = try? textDocument(crdt: column, text: text) else { return nil }
    if let since {
      let update = document.update(since: since)
      if update != document.update() { return TextOps(update) }
    }
    if case .blob(let bytes) = column { return TextOps(bytes: bytes) }
    return TextOps(bytes: document.encoded())
  }
}
