import DaemonCore
import EventLoopTestKit
import SyncModel
import Testing

@Suite struct TokenStateMachineTests {
  @Test func aFileIsReadAtTheFirstConnectionAndNotAgainUntilRefused() {
    var tokens = TokenStateMachine(source: .file)
    #expect(tokens.connectionWanted() == [.refresh(1)])
    // A second attempt while the file is read waits for the same read.
    #expect(tokens.connectionWanted() == [])
    #expect(tokens.refreshed("t1", number: 1) == [.connect(token: "t1")])
    tokens.accepted()
    #expect(tokens.connectionWanted() == [.connect(token: "t1")])
    tokens.refused(reason: "token expired")
    #expect(tokens.problem?.contains("token_file") == true)
    #expect(tokens.problem?.contains("token expired") == true)
    #expect(tokens.connectionWanted() == [.refresh(2)])
    #expect(tokens.refreshed("t2", number: 2) == [.connect(token: "t2")])
    tokens.accepted()
    #expect(tokens.problem == nil)
  }

  @Test func aHandedTokenWinsUntilRefusedThenTheSourceDoes() {
    var tokens = TokenStateMachine(source: .command)
    #expect(tokens.connectionWanted() == [.refresh(1)])
    #expect(tokens.refreshed("from-command", number: 1) == [.connect(token: "from-command")])
    #expect(tokens.hand("from-app") == [.reconnect])
    #expect(tokens.origin == "api")
    #expect(tokens.connectionWanted() == [.connect(token: "from-app")])
    // Handing the same token again changes nothing.
    #expect(tokens.hand("from-app") == [])
    // A reload re-runs the command, but the handed token still wins: no reconnect.
    #expect(tokens.reconfigure(.command) == [.refresh(2)])
    #expect(tokens.refreshed("from-command-2", number: 2) == [])
    #expect(tokens.connectionWanted() == [.connect(token: "from-app")])
    tokens.refused(reason: "token expired")
    #expect(tokens.handed == nil)
    #expect(tokens.origin == "token_command")
    #expect(tokens.connectionWanted() == [.connect(token: "from-command-2")])
  }

  @Test func aWithdrawnTokenGivesWayToTheSourceWithAReconnect() {
    var tokens = TokenStateMachine(source: .file)
    #expect(tokens.withdraw() == [], "nothing handed, nothing to withdraw")
    #expect(tokens.hand("app") == [.reconnect])
    #expect(tokens.connectionWanted() == [.connect(token: "app")])
    #expect(tokens.withdraw() == [.reconnect])
    #expect(tokens.origin == "token_file")
    #expect(tokens.connectionWanted() == [.refresh(1)])
    // Withdrawn before any connection used it: no reconnect.
    var fixed = TokenStateMachine(source: .fixed("configured"))
    #expect(fixed.connectionWanted() == [.connect(token: "configured")])
    #expect(fixed.hand("app") == [.reconnect])
    #expect(fixed.withdraw() == [])
  }

  @Test func aHandedTokenServesAConnectionWaitingForAFailingSource() {
    var tokens = TokenStateMachine(source: .command)
    #expect(tokens.connectionWanted() == [.refresh(1)])
    #expect(tokens.hand("from-app") == [.connect(token: "from-app")])
    // The command's late answer does not replace it.
    #expect(tokens.refreshFailed("exit status 1", number: 1) == [])
  }

  @Test func aFailedRefreshFailsTheAttemptAndTheNextAttemptTriesAgain() {
    var tokens = TokenStateMachine(source: .command)
    #expect(tokens.connectionWanted() == [.refresh(1)])
    #expect(
      tokens.refreshFailed("token_command timed out after 10 s", number: 1) == [
        .fail("token_command timed out after 10 s")
      ])
    #expect(tokens.problem == "token_command timed out after 10 s")
    #expect(tokens.connectionWanted() == [.refresh(2)])
    #expect(tokens.refreshed("good", number: 2) == [.connect(token: "good")])
  }

  @Test func aRefusalAloneNeitherRefreshesNorReconnects() {
    var tokens = TokenStateMachine(source: .file)
    _ = tokens.connectionWanted()
    _ = tokens.refreshed("bad", number: 1)
    // Only a connection attempt, which the sync machine schedules with its backoff, reads the file again.
    tokens.refused(reason: "the token is not valid")
    #expect(tokens.refreshing == nil)
    #expect(tokens.current == nil)
  }

  @Test func aFixedTokenIsUsedAgainAfterARefusalAndTheProblemStaysUntilAccepted() {
    var tokens = TokenStateMachine(source: .fixed("static"))
    #expect(tokens.connectionWanted() == [.connect(token: "static")])
    tokens.refused(reason: "token revoked")
    #expect(tokens.problem?.contains("[broker] token") == true)
    #expect(tokens.connectionWanted() == [.connect(token: "static")])
    #expect(tokens.problem != nil)
    tokens.accepted()
    #expect(tokens.problem == nil)
  }

  @Test func aReloadReconnectsOnlyWhenTheTokenChanged() {
    var tokens = TokenStateMachine(source: .file)
    _ = tokens.connectionWanted()
    _ = tokens.refreshed("same", number: 1)
    #expect(tokens.reconfigure(.file) == [.refresh(2)])
    #expect(tokens.refreshed("same", number: 2) == [])
    #expect(tokens.reconfigure(.file) == [.refresh(3)])
    #expect(tokens.refreshed("renewed", number: 3) == [.reconnect])
    #expect(tokens.connectionWanted() == [.connect(token: "renewed")])
    // From a file to a fixed token: reconnect with it; the old source's late answer is dropped.
    #expect(tokens.reconfigure(.file) == [.refresh(4)])
    #expect(tokens.reconfigure(.fixed("fixed")) == [.reconnect])
    #expect(tokens.refreshed("late", number: 4) == [])
    #expect(tokens.connectionWanted() == [.connect(token: "fixed")])
  }

  /// The two machines as the wiring runs them, on a clock: a token refused on the open stream is read again only
  /// when the reconnect delay is over, and one that stays refused is read again after longer and longer delays.
  @Test func aTokenThatStaysRefusedIsReadAgainOnlyAtEachBackoffAttempt() {
    var trace = SyncTrace(pages: ["a"])
    var tokens = TokenStateMachine(source: .file)
    var reads: [UInt64] = []
    /// What the wiring does with `openConnection`: ask for a token; the file is read at once.
    func attempt(at time: UInt64, fileHolds token: String) -> [TokenStateMachine.Action] {
      var actions = tokens.connectionWanted()
      if case .refresh(let number) = actions.first {
        reads.append(time)
        actions = tokens.refreshed(token, number: number)
      }
      return actions
    }
    trace.step(at: 0, .start(now: 0), [.openConnection])
    #expect(attempt(at: 0, fileHolds: "good") == [.connect(token: "good")])
    trace.connectToLive(at: 0)
    // At 60 s the broker closes the stream 4401 `token expired`; the file still holds the expired token.
    tokens.refused(reason: "token expired")
    var time: UInt64 = 60_000
    var delay = trace.delay(bound: 500)
    trace.step(
      at: time, .connectionClosed(now: time, reason: "4401 token expired"), [.scheduleTimer(at: time + delay)]
    )
    // Each attempt reads the file once, at its backoff time; the upgrade is refused 401 and the bound doubles.
    for (index, bound) in [UInt64(1_000), 2_000, 4_000, 8_000].enumerated() {
      #expect(reads.count == index + 1)
      time += delay
      trace.step(at: time, .timerFired(now: time), [.openConnection])
      #expect(attempt(at: time, fileHolds: "expired") == [.connect(token: "expired")])
      #expect(reads.last == time)
      tokens.refused(reason: "token expired")
      #expect(tokens.refreshing == nil, "a refusal starts no read of its own")
      delay = trace.delay(bound: bound)
      trace.step(at: time, .connectionFailed(now: time, reason: "401"), [.scheduleTimer(at: time + delay)])
    }
    #expect(reads.count == 5)
    // The file is renewed: the next attempt reads it and connects.
    time += delay
    trace.step(at: time, .timerFired(now: time), [.openConnection])
    #expect(attempt(at: time, fileHolds: "renewed") == [.connect(token: "renewed")])
  }
}
