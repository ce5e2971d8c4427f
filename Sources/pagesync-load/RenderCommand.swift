import ArgumentParser
import LoadCore

#if canImport(Glibc)
  import Glibc
#endif

struct RenderCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "render",
    abstract: "Draw saved reports (--json) as the plots of --html: each point the median across the runs.",
    discussion: """
      One scenario at a time; `run` and `compare` reports alike. A report's "label" (--label) makes its runs a \\
      series of their own (an old and a new build side by side); reports without one, given from several \\
      directories, are labelled by their directory's name.
      """)

  @Option(help: "The HTML page to write.")
  var html: String

  @Option(help: "Also write each plot as an SVG file of its own into this directory (for docs).")
  var svgDir: String?

  @Argument(help: "Reports written by `run … --json` or `compare … --json`.")
  var reports: [String]

  func validate() throws {
    guard !reports.isEmpty else { throw ValidationError("render needs at least one report file") }
  }

  func run() throws {
    let directories = Set(reports.map(Self.directory))
    let values = try reports.map { path -> ReportValue in
      let text = try ReportFile.read(path)
      let report: ReportValue
      do { report = try ReportValue.parse(json: text) } catch {
        throw ReportFile.Failure(description: "\(path): not JSON: \(error)")
      }
      guard directories.count > 1, report["label"] == nil else { return report }
      return report.labelled(Self.directory(path).split(separator: "/").last.map(String.init) ?? ".")
    }
    let data: PlotData
    do { data = try PlotData(reports: values) } catch { throw ReportFile.Failure(description: "\(error)") }
    try ReportFile.write(PlotReport.html(data), to: html)
    guard let svgDir else { return }
    for chart in PlotReport.charts(data) {
      try ReportFile.write(chart.svg(standalone: true) + "\n", to: svgDir + "/" + chart.id + ".svg")
    }
  }

  static func directory(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return String(path[..<slash])
  }
}

/// Reading a saved report and writing a plot page, with an error that names the file and the reason.
enum ReportFile {
  struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  static func read(_ path: String) throws -> String {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else {
      throw Failure(description: "cannot read \(path): \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = Glibc.read(fd, &chunk, chunk.count)
      if count < 0 { throw Failure(description: "cannot read \(path): \(String(cString: strerror(errno)))") }
      if count == 0 { break }
      bytes.append(contentsOf: chunk[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  static func write(_ text: String, to path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else {
      throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    var text = text
    let failed = text.withUTF8 { bytes -> Bool in
      var offset = 0
      while offset < bytes.count {
        let count = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if count < 0 {
          if errno == EINTR { continue }
          return true
        }
        offset += count
      }
      return false
    }
    if failed { throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
  }
}
