import Glibc
import PostgresStore
import PostgresTestKit
import StoreInterface
import Testing

/// Issue #19, item 6: PostgreSQL stopped at once (`pg_ctl stop -m immediate`) closes a broker's idle
/// connections without a word; the broker must find that out as "store unavailable" (503, try again), never as a
/// failed statement (500). Found by the fault suite's `postgres` fault (faults.py `--store postgres`): with the
/// server gone, a batch was answered 500 "server closed the connection unexpectedly ... in: BEGIN". A socket shut
/// down here is found lost by libpq at once, so this test passes without that fix too: it covers the reconnect
/// and the error's kind; the server's own immediate shutdown (its warning, then the connection closed, which
/// libpq reports with no SQLSTATE) is reproduced by FaultInjectionTests' seed5TwoBrokersOnPostgresRestartedMidRun.
@Suite struct PostgresConnectionLossTests {
  /// The connection's socket is shut down under libpq, as a server stopped at once leaves it. The next
  /// transaction finds it lost at BEGIN, connects again and runs; a statement on a connection that breaks is
  /// `PostgresUnavailable` (StoreUnavailableError: the broker answers 503).
  @Test func aConnectionClosedWithoutAWordIsUnavailableAndMadeAgain() throws {
    let url = try TestPostgres.shared().makeDatabase()
    let connection = try PostgresConnection(url: url)
    defer { connection.close() }
    #expect(try connection.query("SELECT 1", []) == [[.integer(1)]])

    // Idle, between transactions: BEGIN finds it lost, and the transaction runs on a new connection.
    #expect(shutdown(connection.socket, Int32(SHUT_RDWR)) == 0)
    let value = try connection.transaction(writing: true) { try connection.query("SELECT 2", []) }
    #expect(value == [[.integer(2)]])

    // Inside a transaction: the statement that finds it lost throws the store's "unavailable" error.
    try connection.beginGroup()
    #expect(shutdown(connection.socket, Int32(SHUT_RDWR)) == 0)
    #expect {
      try connection.execute("SELECT 3")
    } throws: { error in
      error is any StoreUnavailableError
    }
    connection.rollbackIfOpen()
    #expect(try connection.query("SELECT 4", []) == [[.integer(4)]])
  }
}
