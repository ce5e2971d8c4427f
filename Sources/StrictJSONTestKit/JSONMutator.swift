/// Seeded damage to valid JSON, to drive two decoders to the edges where they could disagree: changes to the
/// value (a member removed, duplicated or renamed, a value of another type, a null, a number that is not quite
/// whole) and to the bytes (flips, truncations, junk inserted, ranges deleted or repeated).
public enum JSONMutator {
  /// `value` damaged 1 to 3 times, written in a random style, then maybe its bytes damaged too.
  public static func mutate(_ value: TestJSON, using random: inout some RandomNumberGenerator) -> [UInt8] {
    var value = value
    for _ in 0..<Int.random(in: 0...2, using: &random) { value = mutateValue(value, using: &random) }
    var bytes = value.text(.random(using: &random), using: &random)
    if Int.random(in: 0..<3, using: &random) > 0 {
      for _ in 0..<Int.random(in: 1...2, using: &random) { bytes = mutateBytes(bytes, using: &random) }
    }
    return bytes
  }

  /// One change to the value, at a random node.
  public static func mutateValue(_ value: TestJSON, using random: inout some RandomNumberGenerator)
    -> TestJSON
  {
    let count = value.nodeCount
    let target = Int.random(in: 0..<count, using: &random)
    var index = 0
    return value.replacingNode(at: target, counter: &index) { node in
      switch Int.random(in: 0..<10, using: &random) {
      case 0: return .null
      case 9: return laxDamage(node, using: &random)
      case 1: return randomValue(depth: 2, using: &random)
      case 2:
        // A value of another type with the same content where it can be: `"5"` for 5, `[x]` for x.
        switch node {
        case .number(let text): return .string(text)
        case .string(let text): return Double(text) != nil ? .number(text) : .array([node])
        default: return .array([node])
        }
      case 3, 4:
        guard case .object(var members) = node, !members.isEmpty else {
          return randomValue(depth: 1, using: &random)
        }
        let victim = Int.random(in: 0..<members.count, using: &random)
        switch Int.random(in: 0..<4, using: &random) {
        case 0: members.remove(at: victim)
        case 1:
          // A duplicate key, before or after, with another value.
          let duplicate = TestJSON.Member(members[victim].key, randomValue(depth: 1, using: &random))
          members.insert(duplicate, at: Bool.random(using: &random) ? victim : victim + 1)
        case 2: members[victim].key = renamed(members[victim].key, using: &random)
        default:
          members.insert(
            TestJSON.Member(randomKey(using: &random), randomValue(depth: 3, using: &random)),
            at: Int.random(in: 0...members.count, using: &random))
        }
        return .object(members)
      case 5:
        guard case .array(var items) = node, !items.isEmpty else { return node }
        let victim = Int.random(in: 0..<items.count, using: &random)
        if Bool.random(using: &random) {
          items.remove(at: victim)
        } else {
          items.insert(items[victim], at: victim)
        }
        return .array(items)
      case 6:
        // A number written so that it is almost, or only nearly exactly, a whole number.
        guard case .number(let text) = node else { return .number(randomNumberText(using: &random)) }
        let suffixes: [String] = [".0", ".5", "e0", ".0000000000000000001", "e-1", "0"]
        if Int.random(in: 0...suffixes.count, using: &random) == 0 {
          return .number(text.hasPrefix("-") ? String(text.dropFirst()) : "-" + text)
        }
        return .number(text + suffixes.randomElement(using: &random)!)
      case 7:
        guard case .string(let text) = node else { return .string(randomString(using: &random)) }
        return .string(renamed(text, using: &random))
      default:
        return randomValue(depth: 0, using: &random)
      }
    }
  }

  /// `value` with one node written as what `JSONDecoder` lets pass where it does not look and strict JSON
  /// refuses: a trailing comma in an array or object, or a malformed number or string.
  public static func laxMutate(_ value: TestJSON, using random: inout some RandomNumberGenerator) -> [UInt8] {
    var index = 0
    let objects = value.objectNodeIndices()
    if !objects.isEmpty && Bool.random(using: &random) {
      // A member nobody reads, holding it.
      return value.replacingNode(at: objects.randomElement(using: &random)!, counter: &index) { node in
        guard case .object(var members) = node else { return node }
        members.insert(
          TestJSON.Member("x", laxDamage(randomValue(depth: 2, using: &random), using: &random)),
          at: Int.random(in: 0...members.count, using: &random))
        return .object(members)
      }.compactText
    }
    let target = Int.random(in: 0..<value.nodeCount, using: &random)
    return value.replacingNode(at: target, counter: &index) { laxDamage($0, using: &random) }.compactText
  }

  static func laxDamage(_ node: TestJSON, using random: inout some RandomNumberGenerator) -> TestJSON {
    var isFilledContainer = false
    if case .array(let items) = node { isFilledContainer = !items.isEmpty }
    if case .object(let members) = node { isFilledContainer = !members.isEmpty }
    guard isFilledContainer, Bool.random(using: &random) else {
      return .raw(laxJunk.randomElement(using: &random)!)
    }
    var text = node.compactText
    text.insert(UInt8(ascii: ","), at: text.count - 1)
    return .raw(String(decoding: text, as: UTF8.self))
  }

  /// One change to the bytes.
  public static func mutateBytes(_ bytes: [UInt8], using random: inout some RandomNumberGenerator) -> [UInt8]
  {
    var bytes = bytes
    guard !bytes.isEmpty else { return Array(junk.randomElement(using: &random)!.utf8) }
    let at = Int.random(in: 0..<bytes.count, using: &random)
    switch Int.random(in: 0..<7, using: &random) {
    case 0: bytes[at] = UInt8.random(in: 0...255, using: &random)
    case 1: bytes[at] = Array(significant.utf8).randomElement(using: &random)!
    case 2: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &random)
    case 3: bytes.removeSubrange(at...)
    case 4: bytes.insert(contentsOf: junk.randomElement(using: &random)!.utf8, at: at)
    case 5: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...8, using: &random)))
    default:
      let end = min(bytes.count, at + Int.random(in: 1...16, using: &random))
      bytes.insert(contentsOf: bytes[at..<end], at: end)
    }
    return bytes
  }

  /// Bytes that mean something in JSON.
  static let significant = "{}[]:,\"\\ -+.eE0123456789tfnul\t\n\r/"

  /// Pieces of (mostly invalid) JSON to insert.
  static let junk = [
    ",", ",,", "]", "}", "[", "{", "\"", "\\", "null", "nul", "true", "1e400", "-", "01", "1.", ".5", "+1",
    "1e",
    "\\ud800", "\\u12", "\\x", "\u{0}", "\u{1F}", "\u{7F}", "//c", "/*c*/", "'a'", "NaN", "Infinity", " ",
    "\u{A0}",
    "\u{FEFF}", "\"\":", "\"k\":1,", "[1,]", "{\"a\":1,}", "1e-400", "9007199254740993.0",
    "1.0000000000000000001",
    "\u{E9}", "e\u{301}", "\u{1F600}", "\u{D7FF}", "\u{FFFF}",
  ]

  /// Values `JSONDecoder` accepts in a member it does not decode, and strict JSON does not.
  static let laxJunk = [
    "01", "-", "1.", "1e", "-01", "1.e5", "1ee2", "--1", #""\x""#, #""\ud800""#, "\"a\tb\"", "\"\u{1}\"",
    "[1,]",
    #"{"a":1,}"#, #"[01]"#, #"{"\x":1}"#,
  ]

  static func renamed(_ text: String, using random: inout some RandomNumberGenerator) -> String {
    var scalars = Array(text.unicodeScalars)
    let replacements: [Unicode.Scalar] = [
      " ", "/", "\u{0}", "\u{E9}", "\u{212A}", "A", "_", "-", "\"", "\\", "\u{1F600}",
    ]
    if scalars.isEmpty || Bool.random(using: &random) {
      scalars.insert(
        replacements.randomElement(using: &random)!, at: Int.random(in: 0...scalars.count, using: &random))
    } else {
      scalars[Int.random(in: 0..<scalars.count, using: &random)] = replacements.randomElement(using: &random)!
    }
    var result = ""
    result.unicodeScalars.append(contentsOf: scalars)
    return result
  }

  static func randomKey(using random: inout some RandomNumberGenerator) -> String {
    [
      "x", "id", "page", "type", "title", "value", "pages", "op", "mutations", "client", "", "tit\u{6C}e",
      "3",
    ]
    .randomElement(using: &random)!
  }

  /// A random string: ASCII, escapes, non-ASCII, ids.
  public static func randomString(using random: inout some RandomNumberGenerator) -> String {
    let pieces = [
      "a", "Z", "0", "-", "_", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "\u{7F}", "\u{E9}",
      "e\u{301}",
      "\u{1F600}", "\u{4E2D}", "\u{FFFF}", "\u{2028}", "page", "1732244000123:7",
    ]
    return (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces.randomElement(using: &random)! }
      .joined()
  }

  /// A random number as written, well-formed.
  public static func randomNumberText(using random: inout some RandomNumberGenerator) -> String {
    switch Int.random(in: 0..<6, using: &random) {
    case 0: return String(Int.random(in: -1000...1000, using: &random))
    case 1: return String(UInt64.random(in: 0...UInt64.max, using: &random))
    case 2: return "\(Double.random(in: -1e6...1e6, using: &random))"
    case 3:
      return [
        "0", "-0", "1e400", "1e-400", "5e-324", "1.7976931348623157e308", "0.1",
        "123456789012345678901234567890",
      ]
      .randomElement(using: &random)!
    case 4: return "\(Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &random)))"
    default: return String(Int.random(in: 0...9_007_199_254_740_993, using: &random))
    }
  }

  /// A random value nested at most `depth` deep.
  public static func randomValue(depth: Int, using random: inout some RandomNumberGenerator) -> TestJSON {
    switch Int.random(in: 0..<(depth > 0 ? 7 : 4), using: &random) {
    case 0: return .null
    case 1: return .bool(Bool.random(using: &random))
    case 2:
      let text = randomNumberText(using: &random)
      return TestJSON(parsing: Array(text.utf8)) != nil ? .number(text) : .number("1")
    case 3: return .string(randomString(using: &random))
    case 4, 5:
      return .array(
        (0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(depth: depth - 1, using: &random) }
      )
    default:
      return .object(
        (0..<Int.random(in: 0...3, using: &random)).map { _ in
          TestJSON.Member(randomKey(using: &random), randomValue(depth: depth - 1, using: &random))
        })
    }
  }
}

extension TestJSON {
  /// How many values the tree holds, itself included.
  var nodeCount: Int {
    switch self {
    case .array(let items): 1 + items.reduce(0) { $0 + $1.nodeCount }
    case .object(let members): 1 + members.reduce(0) { $0 + $1.value.nodeCount }
    default: 1
    }
  }

  /// The preorder indices of the objects in the tree.
  func objectNodeIndices() -> [Int] {
    var indices: [Int] = []
    var counter = 0
    func visit(_ node: TestJSON) {
      if case .object = node { indices.append(counter) }
      counter += 1
      switch node {
      case .array(let items): for item in items { visit(item) }
      case .object(let members): for member in members { visit(member.value) }
      default: break
      }
    }
    visit(self)
    return indices
  }

  /// The tree with its `target`-th node (preorder) replaced by `change(node)`.
  func replacingNode(at target: Int, counter: inout Int, _ change: (TestJSON) -> TestJSON) -> TestJSON {
    if counter == target {
      counter += 1
      return change(self)
    }
    counter += 1
    switch self {
    case .array(let items):
      return .array(items.map { $0.replacingNode(at: target, counter: &counter, change) })
    case .object(let members):
      return .object(
        members.map { TestJSON.Member($0.key, $0.value.replacingNode(at: target, counter: &counter, change)) }
      )
    default:
      return self
    }
  }
}
