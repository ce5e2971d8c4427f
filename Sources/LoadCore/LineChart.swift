/// One plot as SVG: series of points joined by lines over two axes (linear or log), with ticks, labels, a legend
/// and optional horizontal guides (a latency limit). Pure: values in, markup out.
///
/// Every point is a `circle` carrying its data (`data-x`, `data-y`) and a `title` (the browser's tooltip), so
/// what is drawn can be checked against what was measured; every tick is a `g class="tick"` with its
/// `data-value`. Points a log axis cannot show (0 or below) are left out, and the plot says how many.
public struct LineChart: Sendable {
  /// How an axis labels its ticks.
  public enum TickStyle: Sendable {
    /// The value (`250`, `1k`, `0.5`).
    case number
    /// An axis of 1/(1−p): the percentile (1 → `0%`, 10 → `90%`, 1,000 → `99.9%`).
    case percentile
  }

  public struct Axis: Sendable {
    public var label: String
    public var kind: PlotScale.Kind
    public var ticks: TickStyle

    public init(_ label: String, _ kind: PlotScale.Kind, ticks: TickStyle = .number) {
      self.label = label
      self.kind = kind
      self.ticks = ticks
    }
  }

  public struct Point: Sendable, Equatable {
    public var x: Double
    public var y: Double
    /// The tooltip.
    public var note: String

    public init(x: Double, y: Double, note: String = "") {
      self.x = x
      self.y = y
      self.note = note
    }
  }

  public struct Series: Sendable {
    public var name: String
    public var points: [Point]
    /// Index into the palette.
    public var colour: Int
    public var dashed: Bool

    public init(name: String, points: [Point], colour: Int, dashed: Bool = false) {
      self.name = name
      self.points = points
      self.colour = colour
      self.dashed = dashed
    }
  }

  /// A horizontal line across the plot at `y`.
  public struct Guide: Sendable {
    public var y: Double
    public var label: String

    public init(y: Double, label: String) {
      self.y = y
      self.label = label
    }
  }

  /// Colours of series 0, 1, ...: distinct for the colour-blind and in print (blue, red, green, purple, orange,
  /// grey).
  public static let palette = ["#1f6feb", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#57606a"]
  public static let width = 640.0
  public static let height = 400.0
  static let left = 76.0
  static let right = 24.0
  static let top = 60.0
  static let bottom = 56.0

  /// A name for the chart's file and element id (`[a-z0-9-]`).
  public var id: String
  public var title: String
  public var x: Axis
  public var y: Axis
  public var series: [Series]
  public var guides: [Guide]

  public init(id: String, title: String, x: Axis, y: Axis, series: [Series], guides: [Guide] = []) {
    self.id = id
    self.title = title
    self.x = x
    self.y = y
    self.series = series
    self.guides = guides
  }

  var xScale: PlotScale {
    PlotScale(
      x.kind, covering: series.flatMap { $0.points.map(\.x) }, minimumLow: x.ticks == .percentile ? 1 : nil)
  }
  var yScale: PlotScale {
    PlotScale(y.kind, covering: series.flatMap { $0.points.map(\.y) } + guides.map(\.y))
  }

  /// The position of `point` in the SVG's coordinates, nil if an axis cannot show it.
  func place(_ point: Point, _ xScale: PlotScale, _ yScale: PlotScale) -> (x: Double, y: Double)? {
    guard let fx = xScale.fraction(point.x), let fy = yScale.fraction(point.y) else { return nil }
    let plotWidth = Self.width - Self.left - Self.right
    let plotHeight = Self.height - Self.top - Self.bottom
    return (Self.left + fx * plotWidth, Self.height - Self.bottom - fy * plotHeight)
  }

  /// The chart as an `svg` element. `standalone`: with the SVG namespace, for a file of its own (an `svg` inside
  /// HTML needs none, and the HTML report names no URL at all).
  public func svg(standalone: Bool = false) -> String {
    let xScale = xScale
    let yScale = yScale
    let plotLeft = Self.left
    let plotRight = Self.width - Self.right
    let plotTop = Self.top
    let plotBottom = Self.height - Self.bottom
    var out = Markup()
    var root: [(String, String)] = []
    if standalone { root.append(("xmlns", "http://www.w3.org/2000/svg")) }
    root += [
      ("id", "chart-" + id), ("class", "chart"), ("width", Markup.coordinate(Self.width)),
      ("height", Markup.coordinate(Self.height)),
      ("viewBox", "0 0 \(Markup.coordinate(Self.width)) \(Markup.coordinate(Self.height))"), ("role", "img"),
      ("font-family", "sans-serif"), ("font-size", "12"),
    ]
    out.open("svg", root)
    out.element("title", text: title)
    out.empty(
      "rect", [("x", "0"), ("y", "0"), ("width", "100%"), ("height", "100%"), ("fill", "#ffffff")])
    out.element(
      "text",
      [("x", Markup.coordinate(plotLeft)), ("y", "22"), ("font-size", "15"), ("font-weight", "bold")],
      text: title)
    // Axes' ticks and grid.
    for value in yScale.ticks {
      guard let fraction = yScale.fraction(value) else { continue }
      let position = Markup.coordinate(plotBottom - fraction * (plotBottom - plotTop))
      out.open("g", [("class", "tick y-tick"), ("data-value", ReportValue.format(value, places: 9))])
      out.empty(
        "line",
        [
          ("x1", Markup.coordinate(plotLeft)), ("x2", Markup.coordinate(plotRight)), ("y1", position),
          ("y2", position), ("stroke", "#d8dee4"), ("stroke-width", "1"),
        ])
      out.element(
        "text",
        [
          ("x", Markup.coordinate(plotLeft - 6)), ("y", position), ("text-anchor", "end"),
          ("dominant-baseline", "middle"), ("fill", "#57606a"),
        ], text: tickLabel(value, y.ticks))
      out.close("g")
    }
    // Labels that would overlap the one before are left out (the grid line stays); one that would pass the
    // image's edge ends there instead ("99.99999%").
    var labelledUpTo = -Double.infinity
    for value in xScale.ticks {
      guard let fraction = xScale.fraction(value) else { continue }
      let at = plotLeft + fraction * (plotRight - plotLeft)
      let position = Markup.coordinate(at)
      out.open("g", [("class", "tick x-tick"), ("data-value", ReportValue.format(value, places: 9))])
      out.empty(
        "line",
        [
          ("x1", position), ("x2", position), ("y1", Markup.coordinate(plotTop)),
          ("y2", Markup.coordinate(plotBottom)), ("stroke", "#d8dee4"), ("stroke-width", "1"),
        ])
      let label = tickLabel(value, x.ticks)
      let width = Self.textWidth(label)
      let atEdge = at + width / 2 > Self.width - 2
      let (start, end) = atEdge ? (at - width, at) : (at - width / 2, at + width / 2)
      if start >= labelledUpTo + 6 {
        labelledUpTo = end
        out.element(
          "text",
          [
            ("x", position), ("y", Markup.coordinate(plotBottom + 16)),
            ("text-anchor", atEdge ? "end" : "middle"), ("fill", "#57606a"),
          ], text: label)
      }
      out.close("g")
    }
    out.empty(
      "rect",
      [
        ("x", Markup.coordinate(plotLeft)), ("y", Markup.coordinate(plotTop)),
        ("width", Markup.coordinate(plotRight - plotLeft)),
        ("height", Markup.coordinate(plotBottom - plotTop)),
        ("fill", "none"), ("stroke", "#8c959f"),
      ])
    out.element(
      "text",
      [
        ("x", Markup.coordinate((plotLeft + plotRight) / 2)), ("y", Markup.coordinate(Self.height - 12)),
        ("text-anchor", "middle"),
      ], text: x.label)
    out.element(
      "text",
      [
        ("x", "16"), ("y", Markup.coordinate((plotTop + plotBottom) / 2)), ("text-anchor", "middle"),
        ("transform", "rotate(-90 16 \(Markup.coordinate((plotTop + plotBottom) / 2)))"),
      ], text: y.label)
    for guide in guides {
      guard let fraction = yScale.fraction(guide.y) else { continue }
      let position = Markup.coordinate(plotBottom - fraction * (plotBottom - plotTop))
      out.open("g", [("class", "guide"), ("data-value", ReportValue.format(guide.y, places: 9))])
      out.empty(
        "line",
        [
          ("x1", Markup.coordinate(plotLeft)), ("x2", Markup.coordinate(plotRight)), ("y1", position),
          ("y2", position), ("stroke", "#6e7781"), ("stroke-dasharray", "2 3"),
        ])
      out.element(
        "text",
        [
          ("x", Markup.coordinate(plotRight - 4)), ("y", Markup.coordinate(Double(position)! - 4)),
          ("text-anchor", "end"), ("fill", "#57606a"),
        ], text: guide.label)
      out.close("g")
    }
    // Series: a line through the points it can place, then the points.
    var leftOut = 0
    for item in series {
      let colour = Self.palette[item.colour % Self.palette.count]
      let placed = item.points.sorted { $0.x < $1.x }.compactMap { point in
        place(point, xScale, yScale).map { (point, $0) }
      }
      leftOut += item.points.count - placed.count
      // A percentile curve has dozens of points: smaller marks keep it a line.
      let radius = placed.count > 12 ? "2" : "3.5"
      out.open("g", [("class", "series"), ("data-series", item.name)])
      if placed.count >= 2 {
        var line: [(String, String)] = [
          (
            "points",
            placed.map { Markup.coordinate($0.1.x) + "," + Markup.coordinate($0.1.y) }.joined(separator: " ")
          ),
          ("fill", "none"), ("stroke", colour), ("stroke-width", "2"),
        ]
        if item.dashed { line.append(("stroke-dasharray", "6 4")) }
        out.empty("polyline", line)
      }
      for (point, position) in placed {
        out.open(
          "circle",
          [
            ("cx", Markup.coordinate(position.x)), ("cy", Markup.coordinate(position.y)), ("r", radius),
            ("fill", item.dashed ? "#ffffff" : colour), ("stroke", colour), ("stroke-width", "1.5"),
            ("data-x", ReportValue.format(point.x, places: 9)),
            ("data-y", ReportValue.format(point.y, places: 6)),
          ])
        out.element("title", text: point.note.isEmpty ? "\(item.name): \(point.y)" : point.note)
        out.close("circle")
      }
      out.close("g")
    }
    if series.allSatisfy({ $0.points.isEmpty }) {
      out.element(
        "text",
        [
          ("x", Markup.coordinate((plotLeft + plotRight) / 2)),
          ("y", Markup.coordinate((plotTop + plotBottom) / 2)),
          ("text-anchor", "middle"), ("fill", "#57606a"), ("class", "no-data"),
        ], text: "no data")
    }
    if leftOut > 0 {
      out.element(
        "text",
        [
          ("x", Markup.coordinate(plotLeft + 6)), ("y", Markup.coordinate(plotBottom - 8)),
          ("fill", "#57606a"),
          ("class", "left-out"),
        ], text: "\(leftOut) point\(leftOut == 1 ? "" : "s") at 0 or below not shown (log scale)")
    }
    // Legend, in one row under the title.
    var legendX = plotLeft
    for item in series {
      let colour = Self.palette[item.colour % Self.palette.count]
      out.open("g", [("class", "legend"), ("data-series", item.name)])
      var swatch: [(String, String)] = [
        ("x1", Markup.coordinate(legendX)), ("x2", Markup.coordinate(legendX + 22)), ("y1", "42"),
        ("y2", "42"),
        ("stroke", colour), ("stroke-width", "2.5"),
      ]
      if item.dashed { swatch.append(("stroke-dasharray", "6 4")) }
      out.empty("line", swatch)
      out.element(
        "text", [("x", Markup.coordinate(legendX + 28)), ("y", "46")], text: item.name)
      out.close("g")
      legendX += 44 + 7 * Double(item.name.count)
    }
    out.close("svg")
    return out.text
  }

  /// About how wide `text` is at 12 px in a sans-serif font: enough to keep labels apart.
  static func textWidth(_ text: String) -> Double { 6.7 * Double(text.count) }

  func tickLabel(_ value: Double, _ style: TickStyle) -> String {
    switch style {
    case .number: return PlotScale.label(value)
    case .percentile: return ReportValue.format(100 - 100 / value, places: 9) + "%"
    }
  }
}
