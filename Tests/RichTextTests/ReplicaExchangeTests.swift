import RichText
import SeededRandom
import Testing

/// Seeded histories of concurrent edits on three replicas, exchanged in random orders (out of causal order too,
/// through the binary forms, whole states): every replica's local text follows a plain array model, all
/// replicas converge, a replica that has nothing gets the same text from the update and from the state, and the
/// converged text is the one the first implementation gave for the seed (`golden`): the storage may change, the
/// merge's result may not. The goldens are those of `richtext` at fd8efcd (the first implementation with local
/// inserts placed by `insertionPoint`, 018b765, and broker sequences on local edits), computed by this file
/// run against that commit's RichText.
@Suite struct ReplicaExchangeTests {
  /// FNV-1a of the converged text's UTF-8, per seed 1...20, as fd8efcd computed them.
  static let golden: [UInt64] = [
    4_925_017_479_357_941_804,
    2_761_716_998_694_272_433,
    14_634_932_567_499_763_864,
    3_232_805_821_637_358_599,
    14_316_945_520_595_623_191,
    8_661_877_389_266_242_675,
    5_341_990_170_471_254_865,
    390_846_840_222_310_430,
    8_416_608_592_468_225_939,
    7_302_839_537_158_107_367,
    4_234_132_300_503_768_837,
    3_191_599_203_797_364_175,
    946_444_132_168_605_755,
    7_184_035_408_924_021_752,
    17_381_228_786_189_004_193,
    184_998_232_630_939_671,
    2_688_911_841_325_117_383,
    16_418_733_122_617_999_767,
    18_258_322_661_488_552_873,
    6_400_275_424_220_939_664,
  ]

  /// The same with typing: most local edits continue where the replica's last one ended (a character typed,
  /// or one erased before it), as people type.
  static let goldenTyping: [UInt64] = [
    3_843_566_370_614_675_250,
    162_523_204_156_865_479,
    15_326_999_538_379_739_069,
    5_091_650_222_762_446_563,
    16_402_180_494_427_065_734,
    886_213_837_362_772_208,
    7_605_302_629_075_843_121,
    15_865_417_825_802_632_087,
    13_493_975_433_880_855_940,
    2_138_824_747_478_063_816,
    3_987_417_922_412_405_690,
    11_967_268_302_330_880_402,
    17_826_551_759_453_064_397,
    18_092_846_277_460_713_388,
    4_950_397_200_536_578_323,
    3_239_334_192_632_314_348,
    345_476_891_094_247_428,
    2_093_701_823_370_138_069,
    2_024_171_864_284_348_061,
    18_148_275_061_379_792_087,
  ]

  @Test func seededExchangesConvergeOnTheFirstImplementationsText() throws {
    var digests: [UInt64] = []
    for seed in 1...20 { digests.append(try Self.exchange(seed: UInt64(seed))) }
    #expect(digests == Self.golden, "digests: \(digests)")
  }

  @Test func seededTypingConvergesOnTheFirstImplementationsText() throws {
    var digests: [UInt64] = []
    for seed in 1...20 { digests.append(try Self.exchange(seed: UInt64(seed), typing: true)) }
    #expect(digests == Self.goldenTyping, "digests: \(digests)")
  }

  /// FNV-1a of one replica's runs, deletions (`update()`) and marks after seeded local edits (marks among them:
  /// a link's or code span's end decides where text typed among deleted characters goes), per seed 1...10, as
  /// fd8efcd computed them: the local edits' fast paths must leave the runs (ids, origins, tombstones) exactly
  /// as the general path does.
  static let goldenLocal: [UInt64] = [
    6_850_404_710_091_118_530,
    13_974_766_057_949_552_077,
    8_418_230_966_109_596_937,
    11_871_247_276_005_929_868,
    4_685_804_473_734_819_125,
    18_039_970_495_855_400_688,
    4_045_283_370_692_424_680,
    14_216_829_987_431_374_452,
    15_805_949_200_437_103_418,
    390_377_928_661_096_052,
  ]

  @Test func seededLocalEditsLeaveTheFirstImplementationsRuns() throws {
    var digests: [UInt64] = []
    for seed in 1...10 { digests.append(try Self.localEdits(seed: UInt64(seed))) }
    #expect(digests == Self.goldenLocal, "digests: \(digests)")
  }

  /// FNV-1a of what a broker's replica gives since several sequences (`update(since:)`), and of the same from
  /// its state reloaded, per seed 1...10, as fd8efcd computed them: the sequences stamped on runs, deletions and
  /// marks (the devices' and the broker's own: whole-text edits, typing a sequence per keystroke, marks) must
  /// survive whatever the storage does with them.
  static let goldenSince: [UInt64] = [
    781_761_753_587_851_975,
    16_703_238_194_506_798_319,
    13_183_711_052_814_641_951,
    7_145_707_705_742_192_799,
    2_958_448_377_651_729_793,
    17_734_960_825_835_875_927,
    4_753_980_704_606_217_935,
    10_334_781_702_576_291_631,
    1_549_338_677_280_993_011,
    15_611_401_657_711_911_969,
  ]

  @Test func seededBrokerSequencesGiveTheFirstImplementationsUpdates() throws {
    var digests: [UInt64] = []
    for seed in 1...10 { digests.append(try Self.brokerSequences(seed: UInt64(seed))) }
    #expect(digests == Self.goldenSince, "digests: \(digests)")
  }

  static func brokerSequences(seed: UInt64) throws -> UInt64 {
    var random = SplitMix64(seed: seed)
    let names = ["ana", "bo", "cy"]
    var devices = [TextDocument](repeating: TextDocument(text: "seed text", client: "origin"), count: 3)
    var broker = devices[0]
    let alphabet = Array("abcdefgh xyz".unicodeScalars)
    var seq: UInt64 = 0
    var brokerCursor = 0
    for _ in 0..<400 {
      let who = random.below(3)
      let count = devices[who].count
      let position = random.below(count + 1)
      let delete = count > position && random.below(3) == 0 ? random.below(min(count - position, 6)) + 1 : 0
      let length = delete > 0 && random.below(2) == 0 ? 0 : random.below(4) + 1
      var text = ""
      text.unicodeScalars.append(contentsOf: (0..<length).map { _ in alphabet[random.below(alphabet.count)] })
      let update = try devices[who].splice(at: position, delete: delete, insert: text, client: names[who])
      seq += 1
      switch random.below(10) {
      case 0 where broker.count > 0:
        // The broker's own whole-text edit (an old client's edit_block): a word replaced.
        var scalars = broker.scalars
        let from = random.below(scalars.count)
        let to = min(scalars.count, from + random.below(5))
        scalars.replaceSubrange(from..<to, with: "word".unicodeScalars)
        _ = broker.replaceText(
          with: String(String.UnicodeScalarView(scalars)), client: "@broker", seq: seq)
        seq += 1
      case 1:
        // The broker typing on at its cursor, a sequence per keystroke: no run may carry one across them.
        brokerCursor = min(brokerCursor, broker.count)
        for _ in 0...random.below(4) {
          _ = try broker.splice(
            at: brokerCursor, delete: 0, insert: String(alphabet[random.below(alphabet.count)]),
            client: "@broker", seq: seq)
          brokerCursor += 1
          seq += 1
        }
      case 2 where broker.count > 1:
        // A mark the broker makes (a link: its end clings to the last character, which may be deleted later).
        let from = random.below(broker.count - 1)
        let type: MarkType = [.link, .code, .bold][random.below(3)]
        _ = try broker.mark(
          from: from, to: from + 1 + random.below(min(4, broker.count - from - 1)), type: type,
          value: type.needsValue ? "https://example.com" : nil, client: "@broker",
          time: MarkTime(millis: seq, counter: 0), seq: seq)
        seq += 1
      default: break
      }
      if random.below(4) == 0 {
        try broker.apply(encoded: TextCodec.encode(update), seq: seq)
      } else {
        broker.apply(update, seq: seq)
      }
      if random.below(5) == 0 {
        // The device catches up from the broker.
        devices[who].apply(broker.update(since: UInt64(random.below(Int(seq)))))
      }
    }
    let reloaded = try TextDocument(encoded: broker.encoded())
    var description = ""
    for since in [nil, 0, seq / 3, seq / 2, seq - 5, seq] as [UInt64?] {
      for document in [broker, reloaded] {
        let update = document.update(since: since)
        description += "since \(since.map(String.init) ?? "-"):"
        for run in update.runs {
          description += "\(run.client)@\(run.counter)+\(run.length) \(run.left?.description ?? "-") "
          description += "\(run.right?.description ?? "-") \(run.text == nil ? "x" : "v") \(run.seq);"
        }
        for range in update.deletes {
          description += "\(range.client)@\(range.counter)+\(range.length) \(range.seq);"
        }
        for mark in update.marks { description += "\(mark.type) \(mark.time.millis) \(mark.seq);" }
      }
    }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return hash
  }

  static func localEdits(seed: UInt64) throws -> UInt64 {
    var random = SplitMix64(seed: seed)
    var document = TextDocument(text: "seed text", client: "origin")
    var model = Array(document.text.unicodeScalars)
    var cursor = 0
    let alphabet = Array("abcdefgh xyz\né€".unicodeScalars)
    for step in 0..<2000 {
      if random.below(40) == 0 && model.count > 1 {
        // A mark now and then: a link's or code span's end clings to its last character, and text typed
        // among deleted characters goes after the last one such an end clings to.
        let from = random.below(model.count - 1)
        let type: MarkType = [.link, .code, .bold][random.below(3)]
        _ = try document.mark(
          from: from, to: from + 1 + random.below(min(6, model.count - from - 1)), type: type,
          value: type.needsValue ? "https://example.com" : nil, client: "me",
          time: MarkTime(millis: UInt64(step), counter: 0))
      }
      var position = cursor
      if random.below(10) == 0 { position = random.below(model.count + 1) }
      var delete = 0
      var insert: [Unicode.Scalar] = []
      switch random.below(10) {
      case 0..<6: insert = (0...random.below(2)).map { _ in alphabet[random.below(alphabet.count)] }
      case 6..<8:  // backspace
        guard position > 0 else { continue }
        delete = min(random.below(3) + 1, position)
        position -= delete
      default:  // delete
        guard position < model.count else { continue }
        delete = min(random.below(3) + 1, model.count - position)
      }
      var text = ""
      text.unicodeScalars.append(contentsOf: insert)
      _ = try document.splice(at: position, delete: delete, insert: text, client: "me")
      model.replaceSubrange(position..<(position + delete), with: insert)
      cursor = position + insert.count
      #expect(Array(document.text.unicodeScalars) == model, "seed \(seed)")
    }
    var description = ""
    let update = document.update()
    for run in update.runs {
      description += "\(run.client)@\(run.counter)+\(run.length) \(run.left?.description ?? "-") "
      description += "\(run.right?.description ?? "-") \(run.text == nil ? "x" : "v");"
    }
    for range in update.deletes { description += "\(range.client)@\(range.counter)+\(range.length);" }
    for mark in document.marks { description += "\(mark.type) \(mark.start)..<\(mark.end);" }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return hash
  }

  static func exchange(seed: UInt64, typing: Bool = false) throws -> UInt64 {
    var random = SplitMix64(seed: seed)
    let names = ["ana", "bo", "cy"]
    var replicas = [TextDocument](repeating: TextDocument(text: "seed text", client: "origin"), count: 3)
    var models = replicas.map { Array($0.text.unicodeScalars) }
    // Per replica, the updates it has not applied yet.
    var inbox: [[TextUpdate]] = [[], [], []]
    let alphabet = Array("abcdefgh xyz\né€😀".unicodeScalars)
    // Per replica, where its last local edit ended.
    var cursors = [0, 0, 0]
    for step in 0..<(typing ? 1000 : 300) {
      let who = random.below(3)
      if typing && random.below(50) == 0 && models[who].count > 1 {
        // A mark now and then (where text typed among deleted characters goes depends on them).
        let count = models[who].count
        let from = random.below(count - 1)
        let type: MarkType = [.link, .code, .bold][random.below(3)]
        let update = try replicas[who].mark(
          from: from, to: from + 1 + random.below(min(6, count - from - 1)), type: type,
          value: type.needsValue ? "https://example.com" : nil, client: names[who],
          time: MarkTime(millis: UInt64(step), counter: 0))
        for other in 0..<3 where other != who { inbox[other].append(update) }
      }
      switch random.below(10) {
      case 0..<6 where typing && cursors[who] <= models[who].count && random.below(8) != 0:
        // Typing on at the cursor: a character, or erasing the one before it.
        let position = cursors[who]
        let erase = position > 0 && random.below(5) == 0
        let insert = erase ? [] : [alphabet[random.below(alphabet.count)]]
        var text = ""
        text.unicodeScalars.append(contentsOf: insert)
        let at = erase ? position - 1 : position
        let update = try replicas[who].splice(at: at, delete: erase ? 1 : 0, insert: text, client: names[who])
        models[who].replaceSubrange(at..<(at + (erase ? 1 : 0)), with: insert)
        cursors[who] = at + insert.count
        #expect(Array(replicas[who].text.unicodeScalars) == models[who], "seed \(seed)")
        for other in 0..<3 where other != who { inbox[other].append(update) }
      case 0..<6:
        // A local edit.
        let count = models[who].count
        let position = random.below(count + 1)
        let delete =
          count > position && random.below(3) == 0
          ? random.below(min(count - position, 8)) + 1 : 0
        let length = delete > 0 && random.below(2) == 0 ? 0 : random.below(6) + 1
        let insert = (0..<length).map { _ in alphabet[random.below(alphabet.count)] }
        var text = ""
        text.unicodeScalars.append(contentsOf: insert)
        let update = try replicas[who].splice(at: position, delete: delete, insert: text, client: names[who])
        models[who].replaceSubrange(position..<(position + delete), with: insert)
        cursors[who] = position + insert.count
        #expect(Array(replicas[who].text.unicodeScalars) == models[who], "seed \(seed)")
        for other in 0..<3 where other != who { inbox[other].append(update) }
      case 6..<9:
        // Some of the waiting updates, in a random order, some through the binary form.
        var waiting = inbox[who]
        inbox[who] = []
        while !waiting.isEmpty {
          let update = waiting.remove(at: random.below(waiting.count))
          if random.below(4) == 0 {
            try replicas[who].apply(encoded: TextCodec.encode(update))
          } else if random.below(5) == 0 {
            inbox[who].append(update)  // later
          } else {
            replicas[who].apply(update)
          }
        }
        models[who] = Array(replicas[who].text.unicodeScalars)
      default:
        // Another replica's whole state.
        let from = (who + 1 + random.below(2)) % 3
        if random.below(2) == 0 {
          replicas[who].merge(replicas[from])
        } else {
          try replicas[who].apply(encoded: replicas[from].encoded())
        }
        models[who] = Array(replicas[who].text.unicodeScalars)
      }
    }
    for who in 0..<3 {
      for update in inbox[who] { replicas[who].apply(update) }
      for other in 0..<3 where other != who { replicas[who].merge(replicas[other]) }
    }
    let text = replicas[0].text
    for replica in replicas {
      #expect(replica.text == text, "seed \(seed)")
      #expect(!replica.hasPendingOperations, "seed \(seed)")
    }
    var fresh = TextDocument()
    fresh.apply(replicas[1].update())
    #expect(fresh.text == text, "seed \(seed)")
    #expect(try TextDocument(encoded: replicas[2].encoded()).text == text, "seed \(seed)")
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return hash
  }
}

extension SplitMix64 {
  fileprivate mutating func below(_ bound: Int) -> Int { Int(next(upperBound: UInt64(bound))) }
}
