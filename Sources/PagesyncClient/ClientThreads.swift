#if canImport(Glibc)
  import Glibc
#endif

// The client's own threads, and SIGPIPE on the caller's. A library must not change how the process handles a
// signal (`signal(SIGPIPE, SIG_IGN)` would), yet a write to a daemon that hung up must give EPIPE rather than
// kill the app: SIGPIPE is raised on the thread that writes, so blocking it on that thread is enough.

/// Runs `body` on a new detached thread that takes none of the signals an application handles (SIGINT, SIGTERM,
/// SIGPIPE, ...): they stay for the application's own threads, and a write to a closed socket gives EPIPE.
///
/// Nonisolated: the thread's entry point is a C function pointer, which must not be created in `@MainActor`
/// code.
func startDetachedThread(_ body: @escaping @Sendable () -> Void) {
  final class Box: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
  }
  let box = Unmanaged.passRetained(Box(body)).toOpaque()
  // The new thread starts with the creator's mask: block everything asynchronous around the creation so that
  // no signal can land on it before it runs, then restore ours.
  var all = asynchronousSignals()
  var previous = sigset_t()
  pthread_sigmask(SIG_BLOCK, &all, &previous)
  var thread = pthread_t()
  let result = pthread_create(
    &thread, nil,
    { argument in
      let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
      box.body()
      return nil
    }, box)
  pthread_sigmask(SIG_SETMASK, &previous, nil)
  guard result == 0 else {
    // Out of threads: the process is in trouble, but the caller's task must not hang. Run it here instead.
    Unmanaged<Box>.fromOpaque(box).takeRetainedValue().body()
    return
  }
  pthread_detach(thread)
}

/// The signals an application handles itself (termination, job control, its own uses of SIGUSR1/2, SIGCHLD,
/// SIGPIPE). Not the ones the kernel sends a thread for what it did (a bad access, an abort), which must never
/// be blocked, nor SIGPROF, with which profilers and the Swift runtime's crash backtracer stop every thread.
private func asynchronousSignals() -> sigset_t {
  var set = sigset_t()
  sigemptyset(&set)
  for signal in [
    SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD, SIGWINCH, SIGTSTP, SIGTTIN,
    SIGTTOU, SIGURG, SIGVTALRM,
  ] {
    sigaddset(&set, signal)
  }
  return set
}

/// Runs `body` with SIGPIPE blocked on the calling thread, then takes back a SIGPIPE that `body`'s writes left
/// pending (one that was pending before is left alone) and restores the thread's mask.
func withBrokenPipeSignalBlocked<T>(_ body: () -> T) -> T {
  var pipeOnly = sigset_t()
  sigemptyset(&pipeOnly)
  sigaddset(&pipeOnly, SIGPIPE)
  var previous = sigset_t()
  pthread_sigmask(SIG_BLOCK, &pipeOnly, &previous)
  // Already blocked by the caller: whatever our writes raise is theirs to handle, as it would be without us.
  if sigismember(&previous, SIGPIPE) == 1 { return body() }
  var pendingBefore = sigset_t()
  sigpending(&pendingBefore)
  let wasPending = sigismember(&pendingBefore, SIGPIPE) == 1
  let result = body()
  if !wasPending {
    var pending = sigset_t()
    sigpending(&pending)
    if sigismember(&pending, SIGPIPE) == 1 {
      var noWait = timespec()
      sigtimedwait(&pipeOnly, nil, &noWait)
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nil)
  return result
}
