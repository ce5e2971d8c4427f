import CLibUV

/// A failed libuv call: the negative error code it returned and the operation that failed.
///
/// This is the only form in which libuv errors leave the EventLoop module.
public struct LoopError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The libuv error code (a negated errno on Unix, e.g. `-ECONNREFUSED`, or `UV_EOF`).
  public var code: Int32
  /// What was being done, e.g. `"bind 127.0.0.1:7700"`.
  public var operation: String

  public init(code: Int32, operation: String) {
    self.code = code
    self.operation = operation
  }

  /// The symbolic name, e.g. `ECONNREFUSED`.
  public var name: String { String(cString: uv_err_name(code)) }
  /// A human message, e.g. `connection refused`.
  public var message: String { String(cString: uv_strerror(code)) }
  public var description: String { "\(operation): \(message) (\(name))" }

  /// The peer closed its end (end of stream).
  public var isEndOfFile: Bool { code == Int32(UV_EOF.rawValue) }
  /// The operation was cancelled because its handle was closed.
  public var isCancelled: Bool { code == Int32(UV_ECANCELED.rawValue) }

  /// Throws a `LoopError` when `result` is negative; returns it otherwise.
  @discardableResult
  static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(LoopError) -> Int32 {
    if result < 0 { throw LoopError(code: result, operation: operation()) }
    return result
  }
}

/// Errors of the loop's own lifecycle.
public enum LoopLifecycleError: Error, Equatable, Sendable, CustomStringConvertible {
  /// `close()` found handles still open: their owners did not close them. `handles` names their types.
  case handlesStillOpen(handles: [String])

  public var description: String {
    switch self {
    case .handlesStillOpen(let handles):
      "loop closed with \(handles.count) live handle(s): \(handles.joined(separator: ", "))"
    }
  }
}
