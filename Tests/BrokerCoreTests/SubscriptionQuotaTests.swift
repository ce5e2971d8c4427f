import BrokerCore
import Testing

@Suite struct SubscriptionQuotaTests {
  @Test func aStreamGetsItsOwnLimitOrWhatItsUserHasLeft() {
    var quota = SubscriptionQuota()
    #expect(quota.limit(for: "alice", holding: 0, perConnection: 10, perUser: 25) == 10)
    quota.record(user: "alice", from: 0, to: 10)
    quota.record(user: "alice", from: 0, to: 10)
    #expect(quota.count(of: "alice") == 20)
    // A third stream may take the 5 left; one holding 10 already may keep them and take the 5 too.
    #expect(quota.limit(for: "alice", holding: 0, perConnection: 10, perUser: 25) == 5)
    #expect(quota.limit(for: "alice", holding: 10, perConnection: 100, perUser: 25) == 15)
    // Another user is not affected.
    #expect(quota.limit(for: "bob", holding: 0, perConnection: 10, perUser: 25) == 10)
    // A lowered limit (a reload) leaves what is held and allows nothing new.
    #expect(quota.limit(for: "alice", holding: 10, perConnection: 100, perUser: 12) == 10)
  }

  @Test func countsFollowChangesAndForgetUsersWithNone() {
    var quota = SubscriptionQuota()
    quota.record(user: "alice", from: 0, to: 3)
    quota.record(user: "bob", from: 0, to: 1)
    quota.record(user: "alice", from: 3, to: 1)
    #expect(quota.count(of: "alice") == 1)
    #expect(quota.userCount == 2)
    quota.record(user: "alice", from: 1, to: 0)
    quota.record(user: "bob", from: 1, to: 0)
    #expect(quota.count(of: "alice") == 0)
    #expect(quota.userCount == 0, "a user with no subscription costs nothing")
  }
}
