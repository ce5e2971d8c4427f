import ArgumentParser
import PagesyncClient

#if canImport(Glibc)
  import Glibc
#endif

// The daemon's change stream: watch (`GET /v1/events`).

extension PagesyncCommand {
  /// `watch`: one line per event of `GET /v1/events` until interrupted.
  struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract:
        "Print the daemon's changes as they happen: one line per event (with --json, its JSON object).",
      discussion: """
        Starts with the sync state, then a line each time a page's local copy changes, a page enters or \
        leaves the offline set, the sync state changes or a mutation is rejected. If the daemon goes away, \
        watch waits for it and resumes; a "reset" line says events were lost (re-read what you show). Each \
        line is written as it comes. Ends, with status 0, on Ctrl-C, SIGTERM or when its reader goes away \
        (`pagesync watch | head -3`).
        """)

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
      let status = watchEvents(socketPath: connection.socketPath, json: connection.json)
      if status != 0 { throw ExitCode(status) }
    }
  }
}

/// Prints the change stream until SIGINT or SIGTERM, a reader that went away, or a failure; returns the exit
/// status.
///
/// The events are read by the client library's `AsyncSequence` in a task; this thread waits for that task to
/// end. SIGINT and SIGTERM are blocked here before any other thread exists, so every thread inherits the mask
/// and only a thread of our own, in `sigwait`, receives them: it cancels the task (the library then closes the
/// connection) and a second one exits at once.
///
/// Nonisolated: the signal thread's entry point is a C function pointer.
func watchEvents(socketPath: String, json: Bool) -> Int32 {
  var signals = sigset_t()
  sigemptyset(&signals)
  sigaddset(&signals, SIGINT)
  sigaddset(&signals, SIGTERM)
  pthread_sigmask(SIG_BLOCK, &signals, nil)
  let outcome = WatchOutcome()
  let task = Task.detached {
    outcome.finish(await printEvents(LocalAPIClient(socketPath: socketPath), json: json))
  }
  waitForSignals(signals) {
    outcome.interrupted()
    task.cancel()
  }
  return outcome.wait()
}

/// Reads the stream and prints each event; returns the exit status.
private func printEvents(_ client: LocalAPIClient, json: Bool) async -> Int32 {
  do throws(PagesyncClientError) {
    var events = client.events().makeAsyncIterator()
    while let event = try await events.next() {
      // One line per event: the contract's data is one line; a daemon that wrapped it must not break that.
      let line = json ? oneLine(event.json) : HumanOutput.event(event)
      guard writeStandardOutput(Array((line + "\n").utf8)) else { return 0 }  // the reader went away
    }
    return 0  // cancelled: Ctrl-C or SIGTERM
  } catch {
    writeStandardError("pagesync: \(error.commandLineMessage)\n")
    return error.exitCode
  }
}

/// JSON text on one line: a line break outside a string is whitespace, and a valid string holds none.
private func oneLine(_ json: String) -> String {
  guard json.contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return json }
  return String(json.map { $0 == "\n" || $0 == "\r" || $0 == "\r\n" ? " " : $0 })
}

/// Runs `onFirst` on a thread of its own when one of `signals` (blocked everywhere) arrives; a second one
/// ends the process with the conventional 128 + signal.
private func waitForSignals(_ signals: sigset_t, onFirst: @escaping @Sendable () -> Void) {
  final class Context: @unchecked Sendable {
    // @unchecked: read-only after init.
    var signals: sigset_t
    let onFirst: @Sendable () -> Void
    init(_ signals: sigset_t, _ onFirst: @escaping @Sendable () -> Void) {
      self.signals = signals
      self.onFirst = onFirst
    }
  }
  let context = Unmanaged.passRetained(Context(signals, onFirst)).toOpaque()
  var thread = pthread_t()
  let result = pthread_create(
    &thread, nil,
    { argument in
      let context = Unmanaged<Context>.fromOpaque(argument!).takeRetainedValue()
      var received: Int32 = 0
      sigwait(&context.signals, &received)
      context.onFirst()
      sigwait(&context.signals, &received)
      _exit(128 + received)
    }, context)
  if result == 0 {
    pthread_detach(thread)
  } else {
    Unmanaged<Context>.fromOpaque(context).release()
  }
}

/// The exit status of a watch, set once by whichever ends it first, and waited for.
private final class WatchOutcome: @unchecked Sendable {
  // @unchecked: `status` is guarded by `mutex`.
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
  private var status: Int32?
  private var stopping = false

  init() {
    pthread_mutex_init(mutex, nil)
    pthread_cond_init(condition, nil)
  }

  deinit {
    pthread_cond_destroy(condition)
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
    condition.deallocate()
  }

  /// A signal asked to stop: whatever the reading task says next, the watch ends well.
  func interrupted() {
    pthread_mutex_lock(mutex)
    stopping = true
    pthread_mutex_unlock(mutex)
  }

  func finish(_ value: Int32) {
    pthread_mutex_lock(mutex)
    if status == nil { status = stopping ? 0 : value }
    pthread_cond_signal(condition)
    pthread_mutex_unlock(mutex)
  }

  func wait() -> Int32 {
    pthread_mutex_lock(mutex)
    while status == nil { pthread_cond_wait(condition, mutex) }
    let value = status!
    pthread_mutex_unlock(mutex)
    return value
  }
}
