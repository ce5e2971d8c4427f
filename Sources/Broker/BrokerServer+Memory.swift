import BrokerCore
import CMallocInfo
import EventLoop

/// Giving memory back when the broker is idle. A broker with no device connected sits with what its last burst
/// left resident: the code that start-up and the last requests ran (the program's own and its libraries',
/// faulted in 64 KB at a time by the kernel's fault-around), the heap's free pages that glibc keeps, and SQLite's
/// page caches (one per connection: the writer's, each reader's). `scripts/idle-daemon.py` measured an idle
/// broker with no connection at 24–27 MiB (docs/benchmarks.md, round 15). The daemon gives its memory back the
/// same way (`SyncDriver+Memory.swift`). Loop thread only.
extension BrokerServer {
  /// How long the broker must have had no connection and done no work before it gives memory back: long enough
  /// that a client between two requests (a script, a health probe) does not make it fault its code back in for
  /// each, short enough that a broker left alone is small by the time anyone looks.
  static let idleMemoryQuietMillis: UInt64 = 5_000

  /// Starts the idle watch: gives back at once what start-up ran (opening and migrating the store, reading the
  /// configuration: not needed again), then looks at the broker at each of the status sampler's ticks.
  func startIdleMemoryWatch() {
    idleMemory = IdleMemoryStateMachine(quietMillis: Self.idleMemoryQuietMillis, work: idleMemoryWork)
    returnMemory()
  }

  /// What the broker is doing now, for `IdleMemoryStateMachine`: its open connections (HTTP and device streams)
  /// and a count that moves with any byte read or batch applied.
  var idleMemoryObservation: IdleMemoryStateMachine.Observation {
    IdleMemoryStateMachine.Observation(
      connections: http.openConnectionCount + streamCount, work: idleMemoryWork)
  }

  private var idleMemoryWork: UInt64 { UInt64(loop.streamBytesRead) &+ UInt64(batchesApplied) }

  /// A look at the broker at `now` (the loop's time, ms; the status sampler's tick): gives memory back when it
  /// has been idle for `idleMemoryQuietMillis`, once per idle period. Never while a connection is open.
  func lookForIdleMemory(at now: UInt64) {
    guard !returningMemory, !stopping else { return }
    if idleMemory.look(at: now, idleMemoryObservation) { returnMemory() }
  }

  /// Gives back what can be given back: SQLite's unused cache pages, each connection's on its own thread (the
  /// writer's between its groups, each reader's), then the heap's free pages (every thread's arena:
  /// `malloc_trim`), then the resident pages of the read-only file mappings (`MADV_PAGEOUT`: the code and
  /// constants of the program and its libraries; the kernel leaves pages another process maps too). What the
  /// next request runs comes back from the page cache, a page at a time.
  func returnMemory() {
    guard !returningMemory else { return }
    returningMemory = true
    var waiting = readers == nil ? 1 : 2
    // Weak: a completion may run after a shutdown that let the broker go (the writer runs its queue out).
    let finish = { [weak self] in
      waiting -= 1
      guard waiting == 0, let self else { return }
      _ = pagesync_malloc_trim()
      pagedOutMappings = Int(pagesync_page_out_file_mappings())
      memoryReturns += 1
      returningMemory = false
    }
    writer.read(on: loop, { connection in connection.releaseMemory() }, completion: { _ in finish() })
    readers?.releaseMemory(on: loop, completion: finish)
  }
}
