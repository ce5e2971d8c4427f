import BrokerCore
import Testing

@Suite struct LogThrottleTests {
  @Test func oneLineAnIntervalAndTheNextSaysHowManyWereHeldBack() {
    var throttle = LogThrottle(interval: 1_000)
    #expect(throttle.admit(at: 5_000) == 0, "the first event is logged")
    #expect(throttle.admit(at: 5_000) == nil)
    #expect(throttle.admit(at: 5_500) == nil)
    #expect(throttle.admit(at: 5_999) == nil)
    #expect(throttle.admit(at: 6_000) == 3, "an interval later: logged, with the three held back")
    #expect(throttle.admit(at: 6_001) == nil)
    #expect(throttle.admit(at: 60_000) == 1, "after a quiet time, the next at once")
    #expect(throttle.admit(at: 60_999) == nil)
  }

  @Test func aClockAtZeroStillLogsTheFirstEvent() {
    var throttle = LogThrottle(interval: 1_000)
    #expect(throttle.admit(at: 0) == 0)
    #expect(throttle.admit(at: 999) == nil)
    #expect(throttle.admit(at: 1_000) == 1)
  }
}
