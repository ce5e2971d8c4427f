import SeededRandom
import Testing

@testable import LoadCore

/// The pure parts of reading a fan-out run on several threads: the split of subscribers, the merge of the
/// threads' ledgers, a thread's CPU from its stat line, and the harness-limited rule.
@Suite struct ReaderThreadsTests {
  @Test(arguments: [(1, 1), (2, 1), (2, 7), (3, 10), (4, 1000), (8, 5)])
  func everySubscriberIsReadByExactlyOneThread(threads: Int, subscribers: Int) {
    let split = ReaderSplit(threads: threads, subscribers: subscribers, channels: 1)
    var seen = Array(repeating: 0, count: subscribers)
    for thread in 0..<threads {
      for local in 0..<split.count(on: thread) {
        let subscriber = split.subscriber(thread: thread, local: local)
        seen[subscriber] += 1
        #expect(split.place(of: subscriber) == (thread, local))
      }
    }
    #expect(seen.allSatisfy { $0 == 1 })
    let counts = (0..<threads).map(split.count(on:))
    #expect(counts.reduce(0, +) == subscribers)
    #expect((counts.max() ?? 0) - (counts.min() ?? 0) <= 1, "round robin: shares differ by one at most")
  }

  @Test func eachChannelsAcknowledgementsGoToTheThreadsThatReadItsSubscribers() {
    // B1: one page, every thread reads some of its subscribers.
    let one = ReaderSplit(threads: 3, subscribers: 10, channels: 1)
    #expect(one.threadsByChannel() == [[0, 1, 2]])
    #expect(one.channels(on: 1) == [0, 0, 0])
    // B2: a page per subscriber, each page's subscriber on one thread.
    let spread = ReaderSplit(threads: 2, subscribers: 6, channels: 6)
    #expect(spread.threadsByChannel() == [[0], [1], [0], [1], [0], [1]])
    #expect(spread.channels(on: 0) == [0, 2, 4])
    #expect(spread.channels(on: 1) == [1, 3, 5])
    // More threads than subscribers: the spare thread reads nothing and gets nothing.
    let spare = ReaderSplit(threads: 4, subscribers: 3, channels: 3)
    #expect(spare.count(on: 3) == 0)
    #expect(spare.threadsByChannel().allSatisfy { !$0.contains(3) })
  }

  @Test func theDefaultIsHalfTheCoresFromOneToEight() {
    #expect([1, 2, 3, 4, 8, 16, 64].map { ReaderSplit.defaultThreads(cores: $0) } == [1, 1, 1, 2, 4, 8, 8])
  }

  /// Frames read on two threads, each with its own ledger, merge into what one ledger would have counted:
  /// the same frames, regressions, complete subscribers and latency histogram.
  @Test(arguments: [(1, 1), (2, 1), (3, 1), (2, 40), (4, 40)])
  func ledgersOfSeveralThreadsMergeIntoTheOneLedgerOfTheRun(threads: Int, channels: Int) {
    let subscribers = 40
    let split = ReaderSplit(threads: threads, subscribers: subscribers, channels: channels)
    var whole = DeliveryLedger(mode: .everyMessage, subscribers: subscribers, channels: channels)
    var parts = (0..<threads).map {
      DeliveryLedger(mode: .everyMessage, subscriberChannels: split.channels(on: $0), channels: channels)
    }
    let byChannel = split.threadsByChannel()
    var random = SplitMix64(seed: 7)
    for batch in 1...200 {
      let channel = batch % channels
      let scheduledAt = UInt64(batch) * 1_000_000
      whole.acknowledged(token: UInt64(batch), scheduledAt: scheduledAt, channel: channel)
      for thread in byChannel[channel] {
        parts[thread].acknowledged(token: UInt64(batch), scheduledAt: scheduledAt, channel: channel)
      }
      for subscriber in 0..<subscribers where subscriber % channels == channel {
        // Every message once, some twice (a regression), with latencies from 1 µs to ~50 ms.
        let receivedAt = scheduledAt + random.next() % 50_000_000
        let (thread, local) = split.place(of: subscriber)
        let repeats = random.next() % 20 == 0 ? 2 : 1
        for _ in 0..<repeats {
          whole.received(subscriber: subscriber, token: UInt64(batch), at: receivedAt)
          parts[thread].received(subscriber: local, token: UInt64(batch), at: receivedAt)
        }
      }
    }
    for thread in 0..<threads { parts[thread].runAcknowledged = true }
    let merged = DeliveryTally.merged(parts.map(DeliveryTally.init))
    #expect(merged.subscribers == subscribers)
    #expect(merged.frames == whole.frames)
    #expect(merged.regressions == whole.regressions)
    #expect(merged.regressions > 0)
    #expect(merged.unmatchedFrames == 0)
    #expect(merged.completeSubscribers == whole.completeSubscribers)
    // Repeated messages make a subscriber incomplete in every-message mode, in both counts alike.
    #expect(merged.completeSubscribers < subscribers)
    #expect(merged.latency.count == whole.latency.count)
    #expect(merged.latency.summary == whole.latency.summary)
    #expect(merged.latency.distribution == whole.latency.distribution)
  }

  @Test func aThreadWhosePagesNoBatchUpdatedIsCompleteOnceTheRunHasAnAcknowledgement() {
    // B2 at a low rate: this thread's page got no batch in the step, another thread's did.
    var ledger = DeliveryLedger(mode: .coalescing, subscriberChannels: [1], channels: 2)
    #expect(ledger.completeSubscribers == 0)
    ledger.runAcknowledged = true
    #expect(ledger.completeSubscribers == 1)
  }

  @Test func aThreadsCPUTimeIsUserPlusSystemTicksAfterItsName() {
    // The name may hold spaces and parentheses: fields are counted after the last ')'.
    let stat =
      "4242 (pagesync (lo ad)) S 1 4242 4242 0 -1 4194304 130 0 0 0 250 75 0 0 20 0 3 0 1000 1000000 500"
    #expect(ThreadStat.ticks(of: stat) == 325)
    #expect(ThreadStat.ticks(of: "4242 (short) S 1") == nil)
    #expect(ThreadStat.ticks(of: "no parenthesis") == nil)
    #expect(ThreadStat.percent(ticks: 150, ticksPerSecond: 100, seconds: 2) == 75)
    #expect(ThreadStat.percent(ticks: 150, ticksPerSecond: 100, seconds: 0) == 0)
  }

  @Test func theGeneratorOrTheReadersLimitAStepByTheirOwnThreadsFigures() {
    // A busy generator thread, or one that fell behind.
    #expect(HarnessFigures(generatorCPUPercent: 90, lagP99Ms: 0.5).limitedBy == ["generator"])
    #expect(HarnessFigures(generatorCPUPercent: 10, lagP99Ms: 3).limitedBy == ["generator"])
    // The busiest reader at 85% of a core or more, or frames waiting for a reader.
    #expect(
      HarnessFigures(generatorCPUPercent: 10, lagP99Ms: 0.5, busiestReaderCPUPercent: 97).limitedBy == [
        "readers"
      ])
    #expect(
      HarnessFigures(generatorCPUPercent: 10, lagP99Ms: 0.5, busiestReaderCPUPercent: 40, readerLagP99Ms: 6)
        .limitedBy == ["readers"])
    #expect(
      HarnessFigures(generatorCPUPercent: 99, lagP99Ms: 9, busiestReaderCPUPercent: 99).limitedBy
        == ["generator", "readers"])
    // Several threads add up to more than a core; no one of them is busy: not limited.
    let spread = HarnessFigures(
      generatorCPUPercent: 50, harnessCPUPercent: 170, lagP99Ms: 0.5, busiestReaderCPUPercent: 60,
      readerLagP99Ms: 1)
    #expect(!spread.isLimited)
    // A report of the single-threaded harness: its process CPU stands for the generator (and the reading).
    #expect(HarnessFigures(harnessCPUPercent: 95, lagP99Ms: 0.5).limitedBy == ["generator"])
    #expect(!HarnessFigures(harnessCPUPercent: 50, lagP99Ms: 0.5).isLimited)
  }

  @Test func aRunsNotesNameTheLimitedStepsWithTheirFigures() {
    let notes = HarnessFigures.notes(
      steps: [
        ("r100", HarnessFigures(generatorCPUPercent: 5, lagP99Ms: 0.2, busiestReaderCPUPercent: 10)),
        ("r800", HarnessFigures(generatorCPUPercent: 20, lagP99Ms: 0.4, busiestReaderCPUPercent: 97)),
      ], target: "redis")
    #expect(
      notes == [
        "harness-limited: r800: readers (generator 20% of a core, lag p99 0.4 ms; busiest reader 97% of a core, "
          + "reader lag p99 0 ms) — there the figures may be the harness's, not the redis server's"
      ])
    #expect(HarnessFigures.notes(steps: [("", HarnessFigures(lagP99Ms: 0.1))], target: "redis").isEmpty)
    // Behind with no thread busy: the threads waited for a core (the machine's other work), and the note says so.
    let waited = HarnessFigures(
      generatorCPUPercent: 3, lagP99Ms: 0.5, busiestReaderCPUPercent: 40, readerLagP99Ms: 9)
    #expect(waited.isLimited && !waited.busyThread)
    #expect(
      HarnessFigures.notes(steps: [("r100", waited)], target: "redis").last?.contains(
        "reader lag p99 9 ms, no harness thread busy: they waited for a core)") == true)
    #expect(HarnessFigures(generatorCPUPercent: 3, busiestReaderCPUPercent: 90).busyThread)
  }
}
