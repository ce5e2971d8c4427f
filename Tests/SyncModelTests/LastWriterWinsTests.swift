import EventLoopTestKit
import SyncModel
import Testing

private func id(_ text: String) -> EntityID { try! EntityID(validating: text) }

@Suite struct LastWriterWinsTests {
  private static let clients = ["a", "a-b", "a0", "aa", "A", "Z_", "z", "-", "_", "0", "9x"].map(id)

  private func randomStamp(_ random: inout SplitMix64) -> LWWStamp {
    // Times near each other (ties in millis and counter are the interesting part), and some at the extremes.
    let millis: UInt64 =
      switch random.next() % 4 {
      case 0: UInt64.max - random.next() % 3
      case 1: random.next() % 3
      default: 1_700_000_000_000 + random.next() % 4
      }
    let counter = UInt32(random.next() % 3 == 0 ? UInt64(UInt32.max) - random.next() % 2 : random.next() % 3)
    let client = Self.clients[Int(random.next() % UInt64(Self.clients.count))]
    return LWWStamp(time: HLCTimestamp(millis: millis, counter: counter), client: client)
  }

  /// The stores compare stamps as their stored text: that must be the stamps' own order, ties included.
  @Test func theStoredFormSortsAsTheStamps() {
    var random = SplitMix64(seed: 0x1A57)
    for _ in 0..<20_000 {
      let a = randomStamp(&random)
      let b = randomStamp(&random)
      #expect((a.sortKey < b.sortKey) == (a < b), "\(a) vs \(b)")
      #expect((a.sortKey == b.sortKey) == (a == b), "\(a) vs \(b)")
    }
  }

  /// Writes to one register, applied in every order with `replaces` deciding, leave the newest one's value; the
  /// same write applied twice changes nothing the second time.
  @Test func theNewestWriteWinsWhateverTheArrivalOrder() {
    var random = SplitMix64(seed: 0x1A58)
    for _ in 0..<300 {
      let writes = (0..<4).map { n in (stamp: randomStamp(&random), value: n) }
      guard let newest = writes.max(by: { $0.stamp < $1.stamp }) else { continue }
      var orders: [[Int]] = [[]]
      for _ in writes.indices {
        orders = orders.flatMap { order in writes.indices.filter { !order.contains($0) }.map { order + [$0] }
        }
      }
      for order in orders {
        var register: (stamp: String?, value: Int?) = (nil, nil)
        for index in order + [order[0]] {
          let write = writes[index]
          if LastWriterWins.replaces(write.stamp.sortKey, over: register.stamp) {
            register = (write.stamp.sortKey, write.value)
          }
        }
        let expected = writes.filter { $0.stamp == newest.stamp }.map(\.value)
        #expect(register.value.map(expected.contains) == true, "order \(order) of \(writes)")
      }
    }
  }

  /// Stores keep these keys: the text form must never change, or stamps written before and after would not sort
  /// together.
  @Test func sortKeyKeepsItsStoredForm() {
    let key = LWWStamp(time: HLCTimestamp(millis: 1_700_000_000_123, counter: 7), client: id("dev-1")).sortKey
    #expect(key == "00000001700000000123:0000000007@dev-1")
    let largest = LWWStamp(time: HLCTimestamp(millis: .max, counter: .max), client: id("z")).sortKey
    #expect(largest == "18446744073709551615:4294967295@z")
    #expect(
      LWWStamp(time: HLCTimestamp(millis: 0), client: id("a")).sortKey == "00000000000000000000:0000000000@a")
  }

  @Test func anyWriteReplacesAFieldNobodyWroteAndNoWriteReplacesItself() {
    let stamp = LWWStamp(time: HLCTimestamp(millis: 0, counter: 0), client: id("a")).sortKey
    #expect(LastWriterWins.replaces(stamp, over: nil))
    #expect(LastWriterWins.replaces(stamp, over: LWWStamp.origin))
    #expect(!LastWriterWins.replaces(stamp, over: stamp))
  }
}

@Suite struct RowsInViewTests {
  private typealias Row = (id: EntityID, properties: [String: PropertyValue])

  private func rows(_ values: [PropertyValue?], name: String = "n") -> [Row] {
    values.enumerated().map { index, value in (id("r\(index)"), value.map { [name: $0] } ?? [:]) }
  }

  @Test func noViewKeepsCreationOrder() {
    #expect(ViewState().rowsInView(rows([.number(3), nil, .number(1)])) == [id("r0"), id("r1"), id("r2")])
  }

  @Test func aFilterKeepsRowsWithThatExactValue() {
    let view = ViewState(filter: ViewFilter(property: "n", value: .string("x")))
    let found = view.rowsInView(rows([.string("x"), .string("y"), nil, .string("x"), .list(["x"])]))
    #expect(found == [id("r0"), id("r3")])
  }

  @Test func aSortOrdersByValueRowsLackingItLastTiesInCreationOrder() {
    let values: [PropertyValue?] = [.number(2), nil, .number(1), .number(2), .string("a"), .bool(true), nil]
    let ascending = ViewState(sort: ViewSort(property: "n")).rowsInView(rows(values))
    #expect(ascending == ["r5", "r2", "r0", "r3", "r4", "r1", "r6"].map(id))
    let descending = ViewState(sort: ViewSort(property: "n", descending: true)).rowsInView(rows(values))
    #expect(descending == ["r4", "r0", "r3", "r2", "r5", "r1", "r6"].map(id))
  }

  @Test func valuesOfOneKindSortByTheirOwnOrder() {
    #expect(PropertyValue.number(-1).sortsBefore(.number(0.5)))
    #expect(PropertyValue.string("B").sortsBefore(.string("a")))
    #expect(PropertyValue.string("é").sortsBefore(.string("z")) == false)
    #expect(PropertyValue.bool(false).sortsBefore(.bool(true)))
    #expect(PropertyValue.list(["a"]).sortsBefore(.list(["a", ""])))
    #expect(!PropertyValue.number(1).sortsBefore(.number(1)))
  }
}
