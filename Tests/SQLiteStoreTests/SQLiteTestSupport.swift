import EventLoop
import EventLoopTestKit
import SQLiteStore
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension TemporaryDatabase {
  /// A configured read-write connection (WAL, synchronous FULL, foreign keys on).
  func open(synchronous: SQLiteConnection.Synchronous = .full) throws -> SQLiteConnection {
    let connection = try SQLiteConnection(path: path)
    try connection.configure(synchronous: synchronous)
    return connection
  }
}

/// The error a test job throws on purpose.
enum TestJobError: Error, Equatable {
  case failed(Int)
}
