import RichText
import SQLiteStore
import SyncModel

/// The replica name of a block's first text (`add_block`): the broker's, so both derive the same ids.
let initialTextClient = ""

/// A text edit asked for by an app: what `recordTextEdit` turns into a CRDT mutation.
public enum TextEdit: Hashable, Sendable {
  /// Deletes `delete` scalars at `at` and inserts `insert` there.
  case splice(at: Int, delete: Int, insert: String)
  /// Makes the text `text`, by the fewest splices against the current text (so it merges).
  case replace(String)
  /// Sets, or with `remove` clears, a mark over scalars `from ..< to`.
  case mark(from: Int, to: Int, type: MarkType, value: String?, remove: Bool)
}

/// A local block's text as stored: its CRDT state (nil for a block stored before the CRDT and not downloaded
/// since), and whether `text` shows a whole-text edit still queued from before the CRDT (`legacy`).
struct StoredText {
  var document: TextDocument?
  var text: String
  var legacy: Bool

  /// Text edits become CRDT operations only on a state this device and the broker share.
  var canMerge: Bool { document != nil && !legacy }
}

extension LocalStore {
  /// Records a text edit of a local block, in ONE transaction with its queued mutation (as `recordEdits`): a
  /// splice or a mark becomes CRDT operations made on the stored state (`splice_text`, `mark_text`), a
  /// whole-text replacement the fewest splices against the current text. Returns nil when there is nothing to
  /// do (the text is already the one asked for).
  ///
  /// A block whose state this device does not have yet (stored before the CRDT, not downloaded since the
  /// upgrade) or whose text shows a whole-text edit from before it is edited the old way until the broker's
  /// state arrives: its splices and replacements are queued as `edit_block` with the new whole text (the broker
  /// merges it as a diff against its text); marks are refused (`textNotMergeable`).
  public func recordTextEdit(
    block: EntityID, edit: TextEdit, nowMillis: UInt64, observed: HLCTimestamp = .zero
  ) throws -> Mutation? {
    guard let (page, _) = try storedText(block) else { throw LocalStoreError.unknownBlock(block) }
    let client = clientID.rawValue
    let mutations = try recordEdits(
      page: page,
      makers: [
        { time in
          // Read again inside the transaction: the state the operations are made on is the one they commit on.
          guard let (_, stored) = try self.storedText(block) else {
            throw LocalStoreError.unknownBlock(block)
          }
          return try Self.action(for: edit, on: block, stored: stored, client: client, time: time)
        }
      ], nowMillis: nowMillis, observed: observed)
    return mutations.first
  }

  /// The mutation action of `edit` on a block's stored text (nil: nothing to do). A position outside the text
  /// or a bad mark is `invalidTextEdit`, with the text's own message.
  private static func action(
    for edit: TextEdit, on block: EntityID, stored: StoredText, client: String, time: HLCTimestamp
  ) throws -> MutationAction? {
    do {
      return try makeAction(for: edit, on: block, stored: stored, client: client, time: time)
    } catch let error as TextError {
      throw LocalStoreError.invalidTextEdit(error.description)
    }
  }

  private static func makeAction(
    for edit: TextEdit, on block: EntityID, stored: StoredText, client: String, time: HLCTimestamp
  ) throws -> MutationAction? {
    guard var document = stored.document, stored.canMerge else {
      let scalars = Array(stored.text.unicodeScalars)
      switch edit {
      case .replace(let text):
        // Scalar by scalar, as the CRDT compares: `String ==` is canonical equivalence, and would drop a change of
        // normalization (decomposed accents made precomposed).
        if text.unicodeScalars.elementsEqual(stored.text.unicodeScalars) { return nil }
        return .editBlock(block: block, text: text, attributes: nil)
      case .splice(let at, let delete, let insert):
        try checkRange(at: at, delete: delete, count: scalars.count)
        if delete == 0 && insert.isEmpty { return nil }
        var edited = scalars
        edited.replaceSubrange(at..<(at + delete), with: insert.unicodeScalars)
        return .editBlock(block: block, text: String(String.UnicodeScalarView(edited)), attributes: nil)
      case .mark:
        throw LocalStoreError.textNotMergeable(block)
      }
    }
    switch edit {
    case .splice(let at, let delete, let insert):
      try checkRange(at: at, delete: delete, count: document.count)
      if delete == 0 && insert.isEmpty { return nil }
      let update = try document.splice(at: at, delete: delete, insert: insert, client: client)
      return .spliceText(block: block, ops: TextOps(update))
    case .replace(let text):
      let update = document.replaceText(with: text, client: client)
      return update.isEmpty ? nil : .spliceText(block: block, ops: TextOps(update))
    case .mark(let from, let to, let type, let value, let remove):
      let update = try document.mark(
        from: from, to: to, type: type, value: value, remove: remove, client: client,
        time: MarkTime(millis: time.millis, counter: time.counter))
      return .markText(block: block, ops: TextOps(update))
    }
  }

  private static func checkRange(at: Int, delete: Int, count: Int) throws(TextError) {
    guard at >= 0, at <= count else { throw .positionOutOfRange(at, count: count) }
    // Both come from the local API: `at + delete` may overflow (`delete` 2^63-1 trapped the daemon).
    let end = at.addingReportingOverflow(delete)
    guard delete >= 0, !end.overflow, end.partialValue <= count else {
      throw .rangeOutOfRange(at, end.overflow ? .max : end.partialValue, count: count)
    }
  }

  /// The page and stored text of a live local block.
  func storedText(_ block: EntityID) throws -> (EntityID, StoredText)? {
    guard
      let row = try connection.query(
        "SELECT page_id, crdt, text, legacy_text FROM local_block WHERE id = ? AND deleted = 0",
        [.text(block.rawValue)]
      ).first
    else { return nil }
    let page = try entityID(row[0], table: "local_block", column: "page_id")
    guard case .text(let text) = row[2], case .integer(let legacy) = row[3] else {
      throw LocalStoreError.corruptValue(table: "local_block", column: "text, legacy_text", value: "\(row)")
    }
    return (page, StoredText(document: try document(row[1]), text: text, legacy: legacy != 0))
  }

  /// A stored CRDT state (NULL: none).
  func document(_ value: SQLiteValue) throws -> TextDocument? {
    guard case .blob(let bytes) = value else { return nil }
    do throws(TextError) {
      return try TextDocument(encoded: bytes)
    } catch {
      throw LocalStoreError.corruptValue(table: "local_block", column: "crdt", value: error.description)
    }
  }

  /// Writes a block's state with the text and marks it renders to (and clears `legacy_text`).
  func writeText(_ document: TextDocument, of block: EntityID) throws {
    try connection.execute(
      "UPDATE local_block SET crdt = ?, text = ?, marks = ?, legacy_text = 0 WHERE id = ?",
      [
        .blob(document.encoded()), .text(document.text), .text(try json(document.marks)),
        .text(block.rawValue),
      ])
  }

  /// Applies a CRDT update (a queued local one in a rebase, or one of this device's edits) to a local block's
  /// state. A block without a state (see `recordTextEdit`) is left alone: its text comes from the broker.
  func applyTextLocally(_ ops: TextOps, to block: EntityID, on page: EntityID) throws {
    guard
      let row = try connection.query(
        "SELECT crdt FROM local_block WHERE id = ? AND page_id = ?",
        [.text(block.rawValue), .text(page.rawValue)]
      ).first, var document = try document(row[0])
    else { return }
    guard let update = try? ops.update() else { return }  // validated when it was recorded
    document.apply(update)
    try writeText(document, of: block)
  }

  /// The text columns of a block from the broker: the CRDT merged into the local state when the block carries
  /// one, else the broker's text and marks as they are. A whole state is adopted (no local state) or merged; an
  /// update is merged into the local state, or, for a block this device has no state of (one created after the
  /// delta's `since` comes as an update that holds all of it), applied to an empty state and kept if it renders
  /// the broker's text and marks exactly. Otherwise (the block's earlier text is not here) the broker's text is
  /// taken and the block stays without a state until its page is downloaded whole.
  func mergedText(of block: BlockState, local: SQLiteValue) throws -> (
    crdt: SQLiteValue, text: String, marks: String
  ) {
    let brokerMarks = try json(block.marks ?? [])
    guard let crdt = block.crdt else { return (.null, block.text, brokerMarks) }
    let existing = try document(local)
    var merged = existing ?? TextDocument()
    do throws(TextError) {
      try merged.apply(encoded: crdt.bytes)
    } catch {
      throw LocalStoreError.corruptValue(table: "delta", column: "crdt", value: error.description)
    }
    let isState = crdt.bytes.count >= 2 && crdt.bytes[1] == 1
    if existing == nil && !isState
      && (merged.text != block.text || merged.hasPendingOperations || merged.marks != (block.marks ?? []))
    {
      return (.null, block.text, brokerMarks)
    }
    return (.blob(merged.encoded()), merged.text, try json(merged.marks))
  }
}
