import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

/// A child process started with `uv_spawn`, its standard output and error as `ByteStream`s when captured.
///
/// For the load harness (starting a broker or redis-server) and for tests that drive real clients (curl, Python)
/// from a loop without blocking it.
///
/// Threading: loop thread only. The handle must be closed after `onExit` (or killed and then closed).
public final class ChildProcess: LoopHandle {
  /// What to do with one of the child's standard streams.
  public enum Output: Sendable {
    /// Inherit ours.
    case inherit
    /// Discard (/dev/null).
    case ignore
    /// Capture through a pipe: the `ByteStream` is `standardOutput` or `standardError`.
    case capture
  }

  public private(set) var pid: Int32 = 0
  /// The pipe carrying the child's stdout, when captured.
  public private(set) var standardOutput: ByteStream?
  /// The pipe carrying the child's stderr, when captured.
  public private(set) var standardError: ByteStream?
  /// The pipe to the child's stdin, when `input` was requested.
  public private(set) var standardInput: ByteStream?
  /// The child exited: its exit status, and the signal that ended it (0 if none).
  public var onExit: ((_ status: Int64, _ signal: Int32) -> Void)?
  /// Set once the child has exited.
  public private(set) var exitStatus: (status: Int64, signal: Int32)?

  /// Starts `executable` (searched in PATH when it has no slash) with `arguments` (not including argv[0]).
  /// `environment` nil inherits ours; entries are `NAME=value`.
  public init(
    loop: Loop, executable: String, arguments: [String], environment: [String]? = nil,
    workingDirectory: String? = nil, input: Bool = false, output: Output = .capture, error: Output = .inherit
  ) throws(LoopError) {
    super.init(loop: loop, type: UV_PROCESS)
    // uv_spawn initializes the handle; until it succeeds the memory is ours to free.
    var stdio = [uv_stdio_container_t](repeating: uv_stdio_container_t(), count: 3)
    var pipes: [ByteStream] = []
    func pipeContainer(_ flags: UInt32) throws(LoopError) -> (uv_stdio_container_t, ByteStream) {
      let stream = try ByteStream(loop: loop, kind: .pipe)
      pipes.append(stream)
      var container = uv_stdio_container_t()
      container.flags = uv_stdio_flags(UV_CREATE_PIPE.rawValue | flags)
      container.data.stream = stream.stream
      return (container, stream)
    }
    func plain(_ mode: Output, fd: Int32) -> uv_stdio_container_t {
      var container = uv_stdio_container_t()
      if mode == .inherit {
        container.flags = UV_INHERIT_FD
        container.data.fd = fd
      } else {
        container.flags = UV_IGNORE
      }
      return container
    }
    do {
      if input {
        let (c, s) = try pipeContainer(UV_READABLE_PIPE.rawValue)
        stdio[0] = c
        standardInput = s
      } else {
        stdio[0] = plain(.ignore, fd: 0)
      }
      if output == .capture {
        let (c, s) = try pipeContainer(UV_WRITABLE_PIPE.rawValue)
        stdio[1] = c
        standardOutput = s
      } else {
        stdio[1] = plain(output, fd: 1)
      }
      if error == .capture {
        let (c, s) = try pipeContainer(UV_WRITABLE_PIPE.rawValue)
        stdio[2] = c
        standardError = s
      } else {
        stdio[2] = plain(error, fd: 2)
      }
    } catch {
      for pipe in pipes { pipe.close() }
      discardUnregistered()
      throw error
    }

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { $0.map { strdup($0) } + [nil] }
    let cwd = workingDirectory.map { strdup($0) }
    defer {
      for p in argv { free(p) }
      for p in envp ?? [] { free(p) }
      free(cwd ?? nil)
    }
    var options = uv_process_options_t()
    options.exit_cb = { h, status, signal in
      let process = LoopHandle.object(h, as: ChildProcess.self)
      process.exitStatus = (status, signal)
      process.onExit?(status, signal)
    }
    let result = argv.withUnsafeBufferPointer { argvBuffer in
      stdio.withUnsafeMutableBufferPointer { stdioBuffer in
        withOptionalArray(envp) { envBuffer in
          options.file = UnsafePointer(argvBuffer[0]!)
          options.args = UnsafeMutablePointer(mutating: argvBuffer.baseAddress!)
          options.env = envBuffer
          options.cwd = UnsafePointer(cwd ?? nil)
          options.stdio_count = 3
          options.stdio = stdioBuffer.baseAddress
          return uv_spawn(loop.uv, pointer(as: uv_process_t.self), &options)
        }
      }
    }
    // Whether or not the spawn succeeded, libuv has initialized the handle: it must be closed.
    register()
    if result < 0 {
      for pipe in pipes { pipe.close() }
      close()
      throw LoopError(code: result, operation: "spawn \(executable)")
    }
    pid = pointer(as: uv_process_t.self).pointee.pid
  }

  /// Sends `signal` to the child.
  public func kill(_ signal: Int32 = SIGTERM) throws(LoopError) {
    guard exitStatus == nil, !isClosing else { return }
    try LoopError.check(uv_process_kill(pointer(as: uv_process_t.self), signal), "kill \(pid)")
  }

  /// Closes the process handle and the pipes (unread output is lost: close after their `onEnd`).
  public override func close(then: (() -> Void)? = nil) {
    standardInput?.close()
    standardOutput?.close()
    standardError?.close()
    super.close(then: then)
  }

  override func willClose() { onExit = nil }
}

private func withOptionalArray<R>(
  _ array: [UnsafeMutablePointer<CChar>?]?, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> R
) -> R {
  guard var array else { return body(nil) }
  return array.withUnsafeMutableBufferPointer { body($0.baseAddress) }
}
