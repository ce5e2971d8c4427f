import EventLoopTestKit
import Testing

@testable import BrokerCore

@Suite struct CoalescingQueueTests {
  let a = PageKey(10)
  let b = PageKey(20)
  let c = PageKey(30)

  func pages(_ entries: [(page: PageKey, lastUpdatedTime: UInt64)]) -> [PageKey] { entries.map(\.page) }
  func times(_ entries: [(page: PageKey, lastUpdatedTime: UInt64)]) -> [UInt64] {
    entries.map(\.lastUpdatedTime)
  }

  @Test func keepsOneEntryPerPage() {
    var queue = CoalescingQueue()
    #expect(queue.enqueue(a, lastUpdatedTime: 1) == true)
    #expect(queue.enqueue(b, lastUpdatedTime: 2) == true)
    #expect(queue.enqueue(a, lastUpdatedTime: 3) == false)
    #expect(queue.enqueue(a, lastUpdatedTime: 4) == false)
    #expect(queue.enqueue(c, lastUpdatedTime: 5) == true)
    #expect(queue.count == 3)
    #expect(queue.coalescedCount == 2)
    #expect(pages(queue.drain(max: 10)) == [a, b, c])
    #expect(queue.isEmpty)
  }

  @Test func theNewestTimeWinsAndAnOlderOneNeverReplacesIt() {
    var queue = CoalescingQueue()
    queue.enqueue(a, lastUpdatedTime: 5)
    queue.enqueue(a, lastUpdatedTime: 9)
    #expect(queue.pendingTime(of: a) == 9)
    #expect(queue.enqueue(a, lastUpdatedTime: 7) == false)
    #expect(queue.pendingTime(of: a) == 9)
    #expect(queue.enqueue(a, lastUpdatedTime: 9) == false)
    #expect(queue.pendingTime(of: a) == 9)
    #expect(queue.coalescedCount == 3)
    #expect(times(queue.drain(max: 1)) == [9])
  }

  @Test func orderIsByFirstEnqueue() {
    var queue = CoalescingQueue()
    for (page, time) in [(a, 1), (b, 2), (c, 3), (a, 4), (b, 1), (a, 6)] as [(PageKey, UInt64)] {
      queue.enqueue(page, lastUpdatedTime: time)
    }
    let drained = queue.drain(max: 3)
    #expect(pages(drained) == [a, b, c])
    #expect(times(drained) == [6, 2, 3])
  }

  @Test func aPageEnqueuedAfterItWasDrainedGoesToTheBack() {
    var queue = CoalescingQueue()
    queue.enqueue(a, lastUpdatedTime: 1)
    queue.enqueue(b, lastUpdatedTime: 2)
    #expect(pages(queue.drain(max: 1)) == [a])
    #expect(queue.enqueue(a, lastUpdatedTime: 3) == true)
    #expect(pages(queue.drain(max: 5)) == [b, a])
  }

  @Test func drainsInChunks() {
    var queue = CoalescingQueue()
    for page in 0..<10 { queue.enqueue(PageKey(UInt32(page)), lastUpdatedTime: UInt64(100 + page)) }
    #expect(queue.drain(max: 0).isEmpty)
    #expect(pages(queue.drain(max: 3)) == [0, 1, 2].map(PageKey.init))
    #expect(pages(queue.drain(max: 3)) == [3, 4, 5].map(PageKey.init))
    #expect(queue.count == 4)
    var output: [(page: PageKey, lastUpdatedTime: UInt64)] = []
    #expect(queue.drain(max: 3, into: &output) == 3)
    #expect(queue.drain(max: 3, into: &output) == 1)
    #expect(pages(output) == [6, 7, 8, 9].map(PageKey.init))
    #expect(times(output) == [106, 107, 108, 109])
    #expect(queue.drain(max: 3).isEmpty)
    #expect(queue.isEmpty)
  }

  @Test func removeDropsOnlyThatPage() {
    var queue = CoalescingQueue()
    queue.enqueue(a, lastUpdatedTime: 1)
    queue.enqueue(b, lastUpdatedTime: 2)
    queue.enqueue(c, lastUpdatedTime: 3)
    #expect(queue.remove(b) == true)
    #expect(queue.remove(b) == false)
    #expect(queue.count == 2)
    #expect(queue.pendingTime(of: b) == nil)
    #expect(queue.enqueue(b, lastUpdatedTime: 4) == true)
    let drained = queue.drain(max: 5)
    #expect(pages(drained) == [a, c, b])
    #expect(times(drained) == [1, 3, 4])
  }

  @Test func anEmptyQueueHoldsNoMemory() {
    var queue = CoalescingQueue()
    #expect(queue.estimatedMemoryBytes == 0)
    for page in 0..<1_000 { queue.enqueue(PageKey(UInt32(page)), lastUpdatedTime: 1) }
    #expect(queue.estimatedMemoryBytes > 1_000 * 16)
    _ = queue.drain(max: 999)
    #expect(queue.estimatedMemoryBytes < 1_000)
    #expect(queue.remove(PageKey(999)) == true)
    #expect(queue.estimatedMemoryBytes == 0)
    #expect(queue.violations() == [])
  }

  /// Thousands of random enqueues, drains and removes over 300 pages, so the queue crosses the linear-scan limit,
  /// grows and shrinks its table, compacts and frees, checked against an obviously correct ordered list.
  @Test(arguments: [1, 2, 3] as [UInt64]) func randomOperationsMatchAnOrderedList(seed: UInt64) {
    var random = SplitMix64(seed: 0xC0A1_E5CE_0000 + seed)
    var queue = CoalescingQueue()
    var model: [(page: PageKey, lastUpdatedTime: UInt64)] = []
    var coalesced = 0
    for step in 0..<6_000 {
      // Phases of mostly growing and mostly draining, so sizes swing between empty and hundreds.
      let growing = (step / 500) % 2 == 0
      let roll = random.next() % 100
      if roll < (growing ? 70 : 30) {
        let page = PageKey(UInt32(random.next() % 300))
        let time = random.next() % 1_000
        if let position = model.firstIndex(where: { $0.page == page }) {
          model[position].lastUpdatedTime = max(model[position].lastUpdatedTime, time)
          coalesced += 1
          #expect(queue.enqueue(page, lastUpdatedTime: time) == false)
        } else {
          model.append((page, time))
          #expect(queue.enqueue(page, lastUpdatedTime: time) == true)
        }
      } else if roll < 85 {
        let page = PageKey(UInt32(random.next() % 300))
        let position = model.firstIndex(where: { $0.page == page })
        if let position { model.remove(at: position) }
        #expect(queue.remove(page) == (position != nil))
      } else {
        let max = Int(random.next() % 40)
        let drained = queue.drain(max: max)
        let expected = model.prefix(max)
        model.removeFirst(expected.count)
        #expect(pages(drained) == pages(Array(expected)), "step \(step)")
        #expect(times(drained) == times(Array(expected)), "step \(step)")
      }
      #expect(queue.count == model.count)
      #expect(queue.coalescedCount == coalesced)
      #expect(queue.violations() == [], "step \(step)")
      if step % 50 == 0 {
        #expect(pages(queue.pending) == pages(model), "step \(step)")
        #expect(times(queue.pending) == times(model), "step \(step)")
      }
    }
  }
}
