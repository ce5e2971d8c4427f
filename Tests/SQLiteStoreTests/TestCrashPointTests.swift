import SQLiteStore
import Testing

/// The fault-injection test hook (`TestCrashPoint`); that an armed point really kills the process is checked on
/// the built programs (`FaultInjectionTests`), since it ends the process that reaches it.
@Suite struct TestCrashPointTests {
  @Test func aSpecIsALabelAndAPositiveCount() {
    #expect(TestCrashPoint.parse("commit:3")! == ("commit", 3))
    #expect(TestCrashPoint.parse("write:1")! == ("write", 1))
    #expect(TestCrashPoint.parse("a:b:2")! == ("a:b", 2))
    for bad in ["", "commit", "commit:", ":3", "commit:0", "commit:-1", "commit:x", "commit:3 "] {
      #expect(TestCrashPoint.parse(bad) == nil, "\(bad)")
    }
  }

  /// Unarmed (as in every process the suite does not start on purpose), the points do nothing: transactions,
  /// writes and commits run as usual.
  @Test func unarmedPointsDoNothing() throws {
    #expect(!TestCrashPoint.isArmed)
    let connection = try SQLiteConnection(path: ":memory:")
    try connection.execute("CREATE TABLE t (x INTEGER)")
    try connection.transaction {
      try connection.execute("INSERT INTO t (x) VALUES (?)", [.integer(1)])
      TestCrashPoint.reach("edit", inTransaction: true)
    }
    #expect(try connection.query("SELECT count(*) FROM t") == [[.integer(1)]])
  }
}
