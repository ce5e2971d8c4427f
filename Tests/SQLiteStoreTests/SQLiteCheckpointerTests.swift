import EventLoop
import EventLoopTestKit
import SQLiteStore
import Testing

@testable import SQLiteStore

#if canImport(Glibc)
  import Glibc
#endif

/// The checkpointer copies the write-ahead log into the database file on its own thread, woken by the writer's
/// commits; the writer checkpoints itself only when the checkpointer falls behind. Each test commits on its own
/// thread as the writer, and reads the files as SQLite left them (their sizes, and the `sqlite3` command line).
@Suite struct SQLiteCheckpointerTests {
  /// A writer connection with a table of rows one page each.
  private func writer(_ database: TemporaryDatabase) throws -> SQLiteConnection {
    let connection = try database.open()
    try connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    return connection
  }

  /// Commits `count` transactions of one row each: at least one new WAL page each.
  private func commit(_ count: Int, on connection: SQLiteConnection) throws {
    for _ in 0..<count { try connection.execute("INSERT INTO t (body) VALUES (zeroblob(4000))") }
  }

  /// The WAL file's size in pages (frames of a page and its 24-byte header, after a 32-byte file header).
  private func walPages(_ database: TemporaryDatabase) -> Int {
    var info = stat()
    guard stat(database.path + "-wal", &info) == 0 else { return 0 }
    return max(Int(info.st_size) - 32, 0) / (4096 + 24)
  }

  /// What SQLite's own command line says of the file once both connections are closed: its integrity check and
  /// the rows of `t`.
  private func fileCheck(_ database: TemporaryDatabase) throws -> String {
    try runToCompletion(
      "/usr/bin/sqlite3", [database.path, "PRAGMA integrity_check; SELECT count(*) FROM t;"], timeout: 10_000
    ).output
  }

  /// Waits (a bounded while: another thread's work) until `condition` holds.
  private func waitUntil(_ condition: () -> Bool) -> Bool {
    for _ in 0..<2000 {
      if condition() { return true }
      usleep(5000)
    }
    return condition()
  }

  @Test func theCheckpointerCopiesTheLogOffTheWritersCommits() throws {
    let database = TemporaryDatabase()
    defer { database.remove() }
    let connection = try writer(database)
    let checkpointer = try SQLiteCheckpointer(path: database.path, synchronous: .full, pages: 40)
    defer { checkpointer.shutdown() }
    checkpointer.attach(to: connection)
    // One commit at a time, each followed by whatever checkpoint it woke (once 20 pages wait): each copies the
    // whole log, so the next commit writes it from its start. SQLite's own checkpoint (at 1,000 pages) would not
    // have run at all, and the writer had nothing to do.
    for index in 0..<300 {
      try commit(1, on: connection)
      #expect(waitUntil { checkpointer.isIdle }, "commit \(index)")
    }
    #expect(checkpointer.checkpointsByCheckpointer >= 20)
    #expect(checkpointer.pagesCopiedByCheckpointer >= 600)
    #expect(checkpointer.checkpointsByWriter == 0)
    // Never much longer than the 20 pages that wake the checkpointer, where 300 commits wrote ~900 pages.
    #expect(walPages(database) <= 30, "the log grew to \(walPages(database)) pages")
    #expect(checkpointer.lastFailure == nil)
    connection.close()
    checkpointer.shutdown()
    // Every row is there and the file is whole, to SQLite's own command line.
    #expect(try fileCheck(database) == "ok\n300\n")
  }

  /// A checkpoint that ran beside a write leaves that write's pages in the log, so the log cannot start over;
  /// the writer copies those few itself after its COMMIT, and the next commit writes the log from its start.
  @Test func theWriterEndsACheckpointThatRanBesideAWrite() throws {
    let database = TemporaryDatabase()
    defer { database.remove() }
    let connection = try writer(database)
    let checkpointer = try SQLiteCheckpointer(path: database.path, synchronous: .full, pages: 80)
    defer { checkpointer.shutdown() }
    checkpointer.attach(to: connection)
    checkpointer.hold()
    var rows = 0
    while walPages(database) < 81 {
      try commit(1, on: connection)
      rows += 1
    }
    #expect(checkpointer.checkpointsByWriter == 0)
    // The checkpoint runs while a write transaction is open, and copies every committed page.
    try connection.execute("BEGIN IMMEDIATE")
    try connection.execute("INSERT INTO t (body) VALUES (zeroblob(4000))")
    checkpointer.release()
    #expect(waitUntil { checkpointer.isIdle })
    #expect(checkpointer.pagesCopiedByCheckpointer >= 81)
    try connection.execute("COMMIT")
    // The writer copied what that write added (a few pages, at most `pages / 8`), not the log.
    #expect(checkpointer.checkpointsByWriter == 1)
    #expect((1...10).contains(checkpointer.pagesCopiedByWriter), "\(checkpointer.pagesCopiedByWriter)")
    // And the log starts over: the next ten commits do not lengthen the file.
    let length = walPages(database)
    try commit(10, on: connection)
    #expect(walPages(database) == length)
    connection.close()
    checkpointer.shutdown()
    // The rows committed before the checkpoint, the one beside it, and the ten after.
    #expect(try fileCheck(database) == "ok\n\(rows + 11)\n")
  }

  @Test func theWriterCheckpointsItselfWhenTheCheckpointerFallsBehind() throws {
    let database = TemporaryDatabase()
    defer { database.remove() }
    let connection = try writer(database)
    let checkpointer = try SQLiteCheckpointer(path: database.path, synchronous: .full, pages: 20)
    defer { checkpointer.shutdown() }
    checkpointer.attach(to: connection)
    #expect(checkpointer.writerPages == 80)
    // A checkpointer that cannot run (a stalled disk, as far as the writer can tell).
    checkpointer.hold()
    try commit(200, on: connection)
    #expect(checkpointer.checkpointsByCheckpointer == 0)
    #expect(checkpointer.checkpointsByWriter >= 2)
    #expect(checkpointer.pagesCopiedByWriter >= 160)
    #expect(walPages(database) <= 85, "the log grew to \(walPages(database)) pages")
    // Released, it runs the checkpoint it was woken for (once: the commits woke it while it was still due).
    checkpointer.release()
    #expect(waitUntil { checkpointer.isIdle })
    connection.close()
    checkpointer.shutdown()
    #expect(try fileCheck(database) == "ok\n200\n")
  }

  /// Through the store writer, as the broker uses it: groups of jobs committed on the writer's thread, the
  /// checkpointer woken by those commits, every job's row kept.
  @Test func groupsCommittedByTheStoreWriterWakeTheCheckpointer() throws {
    let database = TemporaryDatabase()
    defer { database.remove() }
    let connection = try writer(database)
    let checkpointer = try SQLiteCheckpointer(path: database.path, synchronous: .full, pages: 20)
    checkpointer.attach(to: connection)
    let writer = SQLiteWriter(connection: connection)
    let loop = try Loop()
    var done = 0
    loop.keepsRunningWhenIdle = true
    let watchdog = LoopTimer(loop: loop)
    watchdog.keepsLoopAlive = false
    watchdog.start(after: 10_000) {
      Issue.record("\(100 - done) of 100 jobs did not complete within 10 s")
      loop.keepsRunningWhenIdle = false
    }
    // One job after another, as a trickle of batches: a group (and a commit) each.
    func next() {
      writer.submit(
        on: loop, { try $0.execute("INSERT INTO t (body) VALUES (zeroblob(4000))") },
        completion: { result in
          if case .success = result { done += 1 }
          if done == 100 {
            watchdog.close()
            loop.keepsRunningWhenIdle = false
          } else {
            next()
          }
        })
    }
    next()
    try loop.runUntilDone()
    #expect(done == 100)
    writer.shutdown()
    watchdog.close()
    try loop.close()
    #expect(waitUntil { checkpointer.isIdle })
    #expect(checkpointer.checkpointsByCheckpointer > 0)
    checkpointer.shutdown()
    #expect(try fileCheck(database) == "ok\n100\n")
  }
}
