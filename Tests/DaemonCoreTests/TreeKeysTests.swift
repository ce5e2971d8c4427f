import DaemonCoreTestKit
import SyncModel
import Testing

@testable import DaemonCore

/// The trees a page is in, held inline while there is one: as a set would hold them, whatever the order.
@Suite struct TreeKeysTests {
  typealias Key = OfflineForest.TreeKey
  let a = Key(origin: id("A"), type: .toggled)
  let b = Key(origin: id("B"), type: .favorite)
  let c = Key(origin: id("A"), type: .recent)

  @Test func oneTwoThreeAndBackDown() {
    var keys: OfflineForest.TreeKeys = []
    #expect(keys.isEmpty && keys.count == 0 && Array(keys).isEmpty)
    keys.insert(a)
    keys.insert(a)
    #expect(keys.count == 1 && keys.contains(a) && !keys.contains(b) && Array(keys) == [a])
    keys.insert(b)
    keys.insert(c)
    #expect(keys.count == 3 && Set(keys) == [a, b, c])
    keys.remove(b)
    keys.remove(b)
    #expect(keys.count == 2 && Set(keys) == [a, c])
    keys.remove(a)
    #expect(keys.count == 1 && Array(keys) == [c])
    keys.remove(a)
    #expect(keys.count == 1, "removing a key it does not hold changes nothing")
    keys.remove(c)
    #expect(keys.isEmpty)
  }

  @Test func equalWhenTheyHoldTheSameKeysWhateverTheOrderOrHistory() {
    var first: OfflineForest.TreeKeys = [a, b, c]
    let second: OfflineForest.TreeKeys = [c, b, a]
    #expect(first == second)
    first.remove(c)
    #expect(first != second)
    #expect(first == [b, a])
    var grownAndShrunk: OfflineForest.TreeKeys = [a, b]
    grownAndShrunk.remove(b)
    #expect(grownAndShrunk == [a], "a set back to one key equals one made with it")
    #expect(grownAndShrunk != [b])
  }
}
