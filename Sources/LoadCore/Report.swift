/// A value in a load report: what the table prints and `--json` writes, fields in a fixed order.
public indirect enum ReportValue: Sendable {
  case int(Int)
  case number(Double)
  case string(String)
  case bool(Bool)
  /// A number written with up to `places` decimals, where `number`'s 3 would lose it (a percentile such as
  /// 99.99875).
  case decimal(Double, places: Int)
  case object([(String, ReportValue)])
  /// A list: plot data (a latency distribution's `[percentile, ms]` pairs), which tables leave out.
  case array([ReportValue])

  /// The value at a dotted path (`"delivery.p99_ms"`), nil if absent.
  public subscript(path: String) -> ReportValue? {
    var current = self
    for key in path.split(separator: ".") {
      guard case .object(let fields) = current, let next = fields.first(where: { $0.0 == key })?.1 else {
        return nil
      }
      current = next
    }
    return current
  }

  /// A numeric value as a Double (ints too), nil for anything else.
  public var numeric: Double? {
    switch self {
    case .int(let value): Double(value)
    case .number(let value): value
    case .decimal(let value, _): value
    default: nil
    }
  }

  /// The report with `"label"` (which build or setup it measured: plots draw each label as a series of its own)
  /// after its first field, the scenario; an old label is replaced.
  public func labelled(_ label: String) -> ReportValue {
    guard case .object(var fields) = self else { return self }
    fields.removeAll { $0.0 == "label" }
    fields.insert(("label", .string(label)), at: min(1, fields.count))
    return .object(fields)
  }

  /// The elements of a list, nil for anything else.
  public var elements: [ReportValue]? {
    guard case .array(let elements) = self else { return nil }
    return elements
  }

  /// Text, nil for anything else.
  public var string: String? {
    guard case .string(let text) = self else { return nil }
    return text
  }

  /// Plot data (a list): what tables leave out.
  var isPlotData: Bool { elements != nil }

  /// Every leaf with its dotted path, in order: the rows of a table. A list is a leaf.
  public func flattened(prefix: String = "") -> [(String, ReportValue)] {
    guard case .object(let fields) = self else { return [(prefix, self)] }
    return fields.flatMap { key, value in value.flattened(prefix: prefix.isEmpty ? key : prefix + "." + key) }
  }

  /// Compact JSON, keys in report order.
  public var json: String {
    switch self {
    case .int(let value): return String(value)
    case .number(let value): return ReportValue.format(value)
    case .decimal(let value, let places): return ReportValue.format(value, places: places)
    case .bool(let value): return value ? "true" : "false"
    case .string(let value): return ReportValue.quote(value)
    case .object(let fields):
      return "{" + fields.map { ReportValue.quote($0.0) + ":" + $0.1.json }.joined(separator: ",") + "}"
    case .array(let elements): return "[" + elements.map(\.json).joined(separator: ",") + "]"
    }
  }

  /// The value as a table cell.
  public var text: String {
    switch self {
    case .string(let value): value
    case .object: json
    default: json
    }
  }

  /// A number rounded to 3 decimals; JSON has no NaN or infinity, so those become 0 (a report never has them
  /// unless a run had nothing to measure).
  static func format(_ value: Double, places: Int = 3) -> String {
    guard value.isFinite else { return "0" }
    var scale = 1.0
    for _ in 0..<max(0, min(places, 15)) { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    if rounded == rounded.rounded(), abs(rounded) < 1e15 { return String(Int64(rounded)) }
    return String(rounded)
  }

  static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      default:
        if scalar.value < 0x20 {
          let hex = String(scalar.value, radix: 16)
          out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out + "\""
  }
}

/// Plain-text tables for the end of a run: left-aligned first column, right-aligned figures.
public enum ReportTable {
  /// One row per leaf of `report`: `metric  value`. Text longer than a figure (notes) follows the table as
  /// `metric: text` lines, so it does not widen every row.
  public static func render(_ report: ReportValue) -> String {
    let leaves = report.flattened().filter { !$0.1.isPlotData }
    let long = leaves.filter { $0.1.text.count > 40 }
    let table = render(
      header: ["metric", "value"], rows: leaves.filter { $0.1.text.count <= 40 }.map { [$0.0, $0.1.text] })
    return table + long.map { "\($0.0): \($0.1.text)\n" }.joined()
  }

  /// Rows of cells under `header`, columns padded to their widest cell.
  public static func render(header: [String], rows: [[String]]) -> String {
    let all = [header] + rows
    let columns = all.map(\.count).max() ?? 0
    var widths = Array(repeating: 0, count: columns)
    for row in all {
      for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    func line(_ row: [String]) -> String {
      row.enumerated().map { index, cell in
        let pad = String(repeating: " ", count: widths[index] - cell.count)
        return index == 0 ? cell + pad : pad + cell
      }.joined(separator: "  ")
    }
    let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
    return ([line(header), rule] + rows.map(line)).joined(separator: "\n") + "\n"
  }
}

/// The side-by-side report of `pagesync-load compare`: both runs and, for each figure they share, pagesync's
/// value over Redis's.
public enum ComparisonReport {
  /// `{"scenario", "pagesync", "redis", "ratios"}`; ratios for the numeric leaves both runs have (skipped where
  /// Redis's is 0).
  /// `names`: the two sides' keys (`compare --brokers`: the cluster and one broker alone).
  public static func make(
    scenario: String, pagesync: ReportValue, redis: ReportValue,
    names: (String, String) = ("pagesync", "redis")
  ) -> ReportValue {
    .object([
      ("scenario", .string(scenario)), (names.0, pagesync), (names.1, redis),
      ("ratios", .object(ratios(pagesync: pagesync, redis: redis))),
    ])
  }

  /// pagesync / redis for every numeric leaf of `pagesync` that `redis` has too, keyed by dotted path (not for
  /// process ids, which are numbers but not figures).
  public static func ratios(pagesync: ReportValue, redis: ReportValue) -> [(String, ReportValue)] {
    pagesync.flattened().compactMap { path, value in
      guard !path.hasSuffix("pid"), let ours = value.numeric, let theirs = redis[path]?.numeric, theirs != 0
      else { return nil }
      return (path, .number(ours / theirs))
    }
  }

  /// Four columns: figure, pagesync, redis, ratio; long text (notes) follows the table.
  public static func table(
    pagesync: ReportValue, redis: ReportValue, names: (String, String) = ("pagesync", "redis")
  ) -> String {
    let ratios = Dictionary(ratios(pagesync: pagesync, redis: redis), uniquingKeysWith: { a, _ in a })
    let leaves = pagesync.flattened().filter { !$0.1.isPlotData }
    let isLong = { (path: String, value: ReportValue) in
      value.text.count > 40 || (redis[path]?.text.count ?? 0) > 40
    }
    let rows = leaves.filter { !isLong($0.0, $0.1) }.map { path, value in
      [path, value.text, redis[path]?.text ?? "-", ratios[path].map { $0.text } ?? "-"]
    }
    let notes = leaves.filter { isLong($0.0, $0.1) }.map { path, value in
      "\(names.0) \(path): \(value.text)\n\(names.1) \(path): \(redis[path]?.text ?? "-")\n"
    }
    return ReportTable.render(header: ["metric", names.0, names.1, "ratio"], rows: rows) + notes.joined()
  }
}
