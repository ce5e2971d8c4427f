import EventLoopTestKit
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `pagesync-load … --html` and `render`: the page a run writes holds the points its report has, saved reports
/// render the same way (a series per label or directory), and a file that is not a report is refused by name.
@Suite(.serialized) struct LoadPlotTests {
  static func json(_ text: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
  }

  static func value(_ object: [String: Any], _ path: String) -> Any? {
    var current: Any? = object
    for key in path.split(separator: ".") { current = (current as? [String: Any])?[String(key)] }
    return current
  }

  /// The `data-y` of every point in the chart with `id`, by `data-series`.
  static func points(in page: String, chart id: String) throws -> [String: [Double]] {
    let start = try #require(page.firstRange(of: "id=\"chart-\(id)\""), "a chart \(id)")
    let end = try #require(page[start.upperBound...].firstRange(of: "</svg>"))
    var points: [String: [Double]] = [:]
    for group in page[start.upperBound..<end.lowerBound].split(separator: "<g class=\"series\"").dropFirst() {
      let name = group.firstMatch(of: /data-series="([^"]*)"/).map { String($0.1) } ?? ""
      points[name] = group.matches(of: /data-y="([^"]*)"/).compactMap { Double($0.1) }
    }
    return points
  }

  @Test func aRisingRunWritesThePlotsOfItsReport() throws {
    let directory = ScratchDirectory()
    defer { directory.remove() }
    let html = directory.path + "/b2.html"
    let command = [
      "run", "B2", "--subscribers", "20", "--rate", "100", "--max-rate", "200", "--seconds", "1",
      "--drain-seconds", "5", "--label", "new", "--json", "--quiet", "--html", html,
    ]
    let run = try runToCompletion(builtProgram("pagesync-load"), command, timeout: 180_000)
    // 2: a step lost something (a loaded machine); the plots are drawn all the same, and they are the test.
    #expect(run.status == 0 || run.status == 2, "\(run.output)\(run.errorOutput)")
    let report = try Self.json(run.output)
    #expect(report["label"] as? String == "new")
    var p99s: [Double] = []
    let steps = (report["steps"] as? [String: Any] ?? [:]).keys.sorted {
      Int($0.dropFirst())! < Int($1.dropFirst())!
    }
    #expect(steps.first == "r100")
    for step in steps {
      let distribution = try #require(
        Self.value(report, "steps.\(step).delivery.latency.distribution") as? [[Double]])
      #expect(distribution.count >= 7 && distribution.allSatisfy { $0.count == 2 }, "\(distribution)")
      #expect(
        distribution.first?[0] == 0 && distribution.map { $0[1] } == distribution.map { $0[1] }.sorted())
      #expect(Self.value(report, "steps.\(step).server.cpu_pct") is NSNumber, "the step's server CPU")
      p99s.append(try #require(Self.value(report, "steps.\(step).delivery.latency.p99_ms") as? Double))
    }
    let page = try String(contentsOfFile: html, encoding: .utf8)
    #expect(try Self.points(in: page, chart: "p99") == ["pagesync (new)": p99s])
    #expect((try Self.points(in: page, chart: "percentiles-100")["pagesync (new)"]?.count ?? 0) >= 7)
    #expect(!page.contains("<script") && !page.contains("http"))
  }

  @Test func renderDrawsSavedReportsAsASeriesPerDirectory() throws {
    let directory = ScratchDirectory()
    defer { directory.remove() }
    func report(p99: Double) -> String {
      """
      {"scenario":"B1","pagesync":{"scenario":"B1","rate":100,"delivery":{"updates_per_s":100000,\
      "latency":{"p99_ms":\(p99),"distribution":[[0,1],[50,2],[99,\(p99)]]}},"ok":true},\
      "redis":{"scenario":"B1","rate":100,"delivery":{"updates_per_s":100000,\
      "latency":{"p99_ms":1,"distribution":[[0,0.5],[99,1]]}},"ok":true},"ratios":{}}
      """
    }
    _ = try runToCompletion("/bin/mkdir", [directory.path + "/old", directory.path + "/new"])
    directory.write("old/01.json", report(p99: 10))
    directory.write("old/02.json", report(p99: 30))
    directory.write("old/03.json", report(p99: 20))
    directory.write("new/01.json", report(p99: 4))
    let html = directory.path + "/round.html"
    let paths = ["old/01.json", "old/02.json", "old/03.json", "new/01.json"].map { directory.path + "/" + $0 }
    let run = try runToCompletion(
      builtProgram("pagesync-load"), ["render", "--html", html, "--svg-dir", directory.path] + paths)
    #expect(run.status == 0, "\(run.errorOutput)")
    let page = try String(contentsOfFile: html, encoding: .utf8)
    let p99 = try Self.points(in: page, chart: "p99")
    #expect(p99 == ["pagesync (old)": [20], "redis (old)": [1], "pagesync (new)": [4], "redis (new)": [1]])
    #expect(page.contains("4 reports; each point is the median"))
    let svg = try String(contentsOfFile: directory.path + "/percentiles-100.svg", encoding: .utf8)
    #expect(
      svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\"")
        && svg.contains("data-series=\"pagesync (new)\""))

    directory.write("bad.json", "{\"scenario\":")
    let bad = try runToCompletion(
      builtProgram("pagesync-load"), ["render", "--html", html, directory.path + "/bad.json"])
    #expect(bad.status == 1 && bad.errorOutput.contains("bad.json: not JSON"), "\(bad.errorOutput)")
    directory.write("other.json", "{\"rate\":1}")
    let other = try runToCompletion(
      builtProgram("pagesync-load"), ["render", "--html", html, directory.path + "/other.json"])
    #expect(
      other.status == 1 && other.errorOutput.contains("not a pagesync-load report"), "\(other.errorOutput)")
  }
}
