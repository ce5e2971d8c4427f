import BrokerCore
import Testing

/// When the broker gives memory back, as a trace of looks (one a second, as the status sampler makes them).
@Suite struct IdleMemoryStateMachineTests {
  typealias Observation = IdleMemoryStateMachine.Observation

  /// The times of the looks (from 0, one a second up to `seconds`) at which the machine said to give back.
  static func givingBack(
    _ machine: inout IdleMemoryStateMachine, seconds: UInt64, from start: UInt64 = 0,
    _ observation: (UInt64) -> Observation
  ) -> [UInt64] {
    var times: [UInt64] = []
    for second in start...seconds where machine.look(at: second * 1000, observation(second)) {
      times.append(second)
    }
    return times
  }

  @Test func anIdleBrokerGivesBackOnceAfterTheQuietPeriodAndThenNeverWithoutWork() {
    var machine = IdleMemoryStateMachine(quietMillis: 5000, work: 0)
    #expect(machine.state == .givenBack, "start-up gave back what it ran")
    // Setup: connections and work for 10 s, then nothing for an hour.
    let times = Self.givingBack(&machine, seconds: 3600) { second in
      second < 10 ? Observation(connections: 1, work: second) : Observation(connections: 0, work: 9)
    }
    #expect(times == [15], "first quiet look at 10 s, given back 5 s later, and then no more")
    #expect(machine.state == .givenBack)
  }

  @Test func aBusyBrokerNeverGivesBack() {
    var machine = IdleMemoryStateMachine(quietMillis: 5000, work: 0)
    // A device connects and subscribes (work), then its connection stays open and silent for an hour (a device
    // stream with no news): that keeps the broker busy.
    let silent = Self.givingBack(&machine, seconds: 3600) { second in
      Observation(connections: 1, work: second == 0 ? 1 : 2)
    }
    #expect(silent == [])
    // And so does work between looks with no connection open at any look (short requests, each on its own
    // connection, opened and closed between two looks).
    let shortRequests = Self.givingBack(&machine, seconds: 7200, from: 3601) { second in
      Observation(connections: 0, work: second)
    }
    #expect(shortRequests == [])
    #expect(machine.state == .busy)
  }

  @Test func workMovesTheQuietPeriodsStart() {
    var machine = IdleMemoryStateMachine(quietMillis: 5000, work: 0)
    var observation = Observation(connections: 1, work: 0)
    func look(at now: UInt64) -> Bool { machine.look(at: now, observation) }
    #expect(look(at: 0) == false)
    observation.connections = 0
    #expect(look(at: 1000) == false)
    #expect(machine.state == .quiet(since: 1000))
    // A request 4 s in: the period starts over from the next quiet look.
    observation.work = 1
    #expect(look(at: 5000) == false)
    #expect(look(at: 6000) == false)
    #expect(look(at: 10_999) == false)
    #expect(look(at: 11_000) == true)
  }

  @Test func eachQuietPeriodAfterWorkGivesBackAgain() {
    var machine = IdleMemoryStateMachine(quietMillis: 2000, work: 0)
    // Bursts of 3 s every 20 s: one giving back after each (the count moves at the burst's end too: the look at
    // 3 s is still busy, the quiet period starts at 4 s).
    let times = Self.givingBack(&machine, seconds: 60) { second in
      second % 20 < 3 ? Observation(connections: 2, work: second) : Observation(connections: 0, work: 0)
    }
    #expect(times == [6, 26, 46])
  }
}
