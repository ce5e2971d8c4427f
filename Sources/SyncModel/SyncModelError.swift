/// A value that breaks a rule of the data model. Its `description` names the problem.
public enum SyncModelError: Error, Equatable, Sendable, CustomStringConvertible {
  /// An id that is not `[A-Za-z0-9_-]{1,64}`.
  case invalidID(String)
  /// A hybrid logical clock value that is not `MILLIS:COUNTER`.
  case invalidTimestamp(String)
  /// A text update (`ops`) that is not base64 of a well-formed `TextCodec` update.
  case invalidTextOps(String)

  public var description: String {
    switch self {
    case .invalidID(let text): "invalid id \"\(text)\": ids are 1 to 64 of A-Z a-z 0-9 _ -"
    case .invalidTimestamp(let text): "invalid HLC timestamp \"\(text)\": expected MILLIS:COUNTER"
    case .invalidTextOps(let why): "invalid text ops: \(why)"
    }
  }
}
