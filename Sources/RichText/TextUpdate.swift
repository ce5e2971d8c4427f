/// What one replica sends another: insert runs, deleted ranges and mark operations, with replica (client) names
/// rather than a document's local numbers. A local edit produces a small update; a whole document's state is an
/// update too (its every run, in document order). Applying an update is idempotent and commutative: whatever order
/// updates arrive in, however often, replicas that applied the same set hold the same text and marks.
public struct TextUpdate: Hashable, Sendable {
  public var runs: [InsertRun]
  public var deletes: [DeletedRange]
  public var marks: [MarkOperation]

  public init(runs: [InsertRun] = [], deletes: [DeletedRange] = [], marks: [MarkOperation] = []) {
    self.runs = runs
    self.deletes = deletes
    self.marks = marks
  }

  public var isEmpty: Bool { runs.isEmpty && deletes.isEmpty && marks.isEmpty }

  /// Characters inserted by this update (deleted ones included).
  public var insertedCount: Int { runs.reduce(0) { $0 + Int($1.length) } }
}

/// One character's identity: the replica that typed it and that replica's counter for it (0, 1, 2, ... per
/// replica and document).
public struct CharacterID: Hashable, Sendable, Comparable, CustomStringConvertible {
  public var client: String
  public var counter: UInt32

  public init(client: String, counter: UInt32) {
    self.client = client
    self.counter = counter
  }

  public static func < (a: CharacterID, b: CharacterID) -> Bool {
    (a.client, a.counter) < (b.client, b.counter)
  }

  public var description: String { "\(client)@\(counter)" }
}

/// Consecutive characters typed by one replica at one place: ids `client`/`counter ..< counter + length`, the
/// first inserted right after `left` and all of them before `right` (nil: the document's start or end), each
/// after the one before it (FugueMax's origins, as in Yjs). `text` is nil when every character is deleted (a
/// tombstone keeps its ids and origins, never its text).
public struct InsertRun: Hashable, Sendable {
  public var client: String
  public var counter: UInt32
  public var length: UInt32
  public var left: CharacterID?
  public var right: CharacterID?
  /// The characters (`length` Unicode scalars), or nil for a tombstone.
  public var text: [Unicode.Scalar]?
  /// The broker's sequence when the run reached it (0 elsewhere): what `encoded(since:)` filters on.
  public var seq: UInt64

  public init(
    client: String, counter: UInt32, length: UInt32, left: CharacterID?, right: CharacterID?,
    text: [Unicode.Scalar]?, seq: UInt64 = 0
  ) {
    self.client = client
    self.counter = counter
    self.length = length
    self.left = left
    self.right = right
    self.text = text
    self.seq = seq
  }
}

/// Deleted characters `client`/`counter ..< counter + length`.
public struct DeletedRange: Hashable, Sendable {
  public var client: String
  public var counter: UInt32
  public var length: UInt32
  public var seq: UInt64

  public init(client: String, counter: UInt32, length: UInt32, seq: UInt64 = 0) {
    self.client = client
    self.counter = counter
    self.length = length
    self.seq = seq
  }
}

/// Where a mark's boundary sits: just before or just after a character (whether the character is later deleted
/// or not), or at the document's end. Text typed at the boundary falls inside or outside the mark according to
/// which side the boundary clings to (Peritext).
public enum MarkAnchor: Hashable, Sendable {
  case before(CharacterID)
  case after(CharacterID)
  case end
}

/// One formatting operation: set (or, with `remove`, clear) mark `type` with `value` between two anchors. Of the
/// operations of one type covering a character, the one with the greatest (`time`, `client`) wins.
public struct MarkOperation: Hashable, Sendable {
  public var type: MarkType
  public var value: String?
  public var remove: Bool
  public var start: MarkAnchor
  public var end: MarkAnchor
  public var client: String
  /// The hybrid logical clock reading of the edit, as (milliseconds, counter).
  public var time: MarkTime
  public var seq: UInt64

  public init(
    type: MarkType, value: String?, remove: Bool, start: MarkAnchor, end: MarkAnchor, client: String,
    time: MarkTime, seq: UInt64 = 0
  ) {
    self.type = type
    self.value = value
    self.remove = remove
    self.start = start
    self.end = end
    self.client = client
    self.time = time
    self.seq = seq
  }

  /// What orders conflicting operations: time, then client.
  var stamp: MarkStamp { MarkStamp(time: time, client: client) }
}

/// A hybrid logical clock reading: milliseconds, then a counter.
public struct MarkTime: Hashable, Sendable, Comparable {
  public var millis: UInt64
  public var counter: UInt32

  public init(millis: UInt64, counter: UInt32) {
    self.millis = millis
    self.counter = counter
  }

  public static func < (a: MarkTime, b: MarkTime) -> Bool { (a.millis, a.counter) < (b.millis, b.counter) }
}

struct MarkStamp: Hashable, Comparable {
  var time: MarkTime
  var client: String
  static func < (a: MarkStamp, b: MarkStamp) -> Bool { (a.time, a.client) < (b.time, b.client) }
}

/// The kinds of formatting, and on which side each grows: text typed at the end of a bold range is bold (as in
/// every editor), text typed at the end of a link or of inline code is not.
public enum MarkType: String, Hashable, Sendable, CaseIterable, Comparable {
  case bold, italic, underline, strike, code, link, color

  /// Whether text typed right after the range takes the mark.
  public var growsAtEnd: Bool {
    switch self {
    case .bold, .italic, .underline, .strike, .color: true
    case .code, .link: false
    }
  }

  /// Whether the mark carries a value (a link's URL, a color).
  public var needsValue: Bool { self == .link || self == .color }

  public static func < (a: MarkType, b: MarkType) -> Bool { a.rawValue < b.rawValue }
}

/// A mark as a reader sees it: `type` (with `value`) over the Unicode scalars `start ..< end`.
public struct TextMark: Hashable, Sendable, Codable {
  public var type: String
  public var start: Int
  public var end: Int
  public var value: String?

  public init(type: String, start: Int, end: Int, value: String? = nil) {
    self.type = type
    self.start = start
    self.end = end
    self.value = value
  }
}
