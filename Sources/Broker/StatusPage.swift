/// The broker's status page for operators (`GET /status`, docs/operations.md "Status page"): one self-contained
/// HTML document, inline CSS, no script, no external asset, that reloads itself (`<meta http-equiv="refresh">`).
///
/// It is made from the numbers `/metrics` exports (`BrokerMetrics.Figures`, `BrokerMetrics.commits`), so the two
/// cannot disagree; each figure that `/metrics` also has carries the sample's name in `data-metric` and its
/// exact value in `data-value` (what a test, or a scraper of the page, compares). Every string that is not a
/// literal of this file is escaped (`HTMLWriter`).
///
/// A pure function of a `Snapshot`: no clock, no I/O.
enum StatusPage {
  /// What the page shows, as read on the loop at one moment.
  struct Snapshot {
    var figures: BrokerMetrics.Figures
    /// Every commit since start.
    var commits: CommitTally
    /// The last seconds' rates, or nil right after start.
    var rates: StatusRates?
    /// How far back the rates look (the window's span), in seconds.
    var windowSeconds: Int
    var epoch: String
    /// Where the broker listens (the real port).
    var address: String
    var uptimeMilliseconds: UInt64
    /// The wall clock when the page was made, in seconds since 1970.
    var nowSeconds: Double
    var refreshSeconds: Int
    /// `BrokerConfiguration.displayedKeys`.
    var configuration: [(key: String, value: String)]
  }

  static let contentType = "text/html; charset=utf-8"

  /// The page as UTF-8 text.
  static func render(_ snapshot: Snapshot) -> String {
    var page = HTMLWriter()
    page.markup("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
    page.open("meta", [("http-equiv", "refresh"), ("content", "\(snapshot.refreshSeconds)")])
    page.markup("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
    page.element("title", "pagesync-broker · \(snapshot.address)")
    page.markup(stylesheet)
    page.markup("</head>\n<body>\n<header><h1>pagesync-broker</h1><p>listening on ")
    page.element("strong", [("id", "address")], snapshot.address)
    page.markup(" · epoch ")
    page.element("code", [("id", "epoch")], snapshot.epoch)
    page.markup("</p></header>\n<main>\n")
    cards(snapshot, into: &page)
    totals(snapshot, into: &page)
    configuration(snapshot.configuration, into: &page)
    page.markup("</main>\n<footer>As of ")
    page.text(StatusFormat.utc(secondsSince1970: snapshot.nowSeconds))
    page.text(". This page reloads every \(snapshot.refreshSeconds) s; rates cover the last ")
    page.text("\(snapshot.windowSeconds) s. The same figures for Prometheus: ")
    page.markup("<a href=\"/metrics\">/metrics</a>.</footer>\n</body></html>\n")
    return page.html
  }

  // MARK: Parts

  private static func cards(_ snapshot: Snapshot, into page: inout HTMLWriter) {
    let figures = snapshot.figures
    let window = "last \(snapshot.rates.map { StatusFormat.decimal($0.seconds) } ?? "0") s"
    page.markup("<section class=\"cards\">\n")

    card("Devices connected", into: &page) { page in
      figure("pagesync_broker_device_streams", figures.deviceStreams, big: true, into: &page)
      page.markup("<p>device streams · ")
      figure("pagesync_broker_connections", figures.connections, into: &page)
      page.text(figures.connections == 1 ? " connection in all" : " connections in all")
      page.markup("</p>")
    }
    card("Subscriptions", into: &page) { page in
      figure("pagesync_broker_subscriptions", figures.subscriptions, big: true, into: &page)
      page.markup("<p>pages followed, across every device stream</p>")
    }
    card("Batches", into: &page) { page in
      rate("batches", snapshot.rates?.batchesPerSecond, into: &page)
      page.text("applied, \(window) · ")
      figure("pagesync_broker_batches_applied_total", figures.batchesApplied, into: &page)
      page.markup(" since start</p>")
    }
    card("Notifications", into: &page) { page in
      rate("notifications", snapshot.rates?.notificationsPerSecond, into: &page)
      page.text("sent, \(window) · ")
      let coalesced = snapshot.rates.map { StatusFormat.perSecond($0.coalescedPerSecond) } ?? "–"
      page.element("span", [("data-rate", "coalesced")], coalesced)
      page.markup(" coalesced</p>")
    }
    card("Writer queue", into: &page) { page in
      figure("pagesync_broker_writer_jobs", figures.writerJobs, big: true, into: &page)
      page.markup("<p>jobs submitted to the SQLite writer, not answered yet</p>")
    }
    card("Commit latency", into: &page) { page in
      commitLatency(snapshot, window: window, into: &page)
    }
    card("Store", into: &page) { page in
      page.element(
        "p",
        [
          ("class", "big"), ("data-metric", "pagesync_broker_store_bytes"),
          ("data-value", "\(figures.storeBytes)"),
        ],
        StatusFormat.bytes(figures.storeBytes))
      page.markup("<p>database file · ")
      page.element(
        "span",
        [("data-metric", "pagesync_broker_store_wal_bytes"), ("data-value", "\(figures.storeWALBytes)")],
        StatusFormat.bytes(figures.storeWALBytes))
      page.markup(" write-ahead log</p>")
    }
    card("Uptime", into: &page) { page in
      page.element(
        "p",
        [
          ("class", "big"), ("id", "uptime"), ("data-metric", "pagesync_broker_start_time_seconds"),
          ("data-value", "\(figures.startTimeSeconds)"),
        ],
        StatusFormat.uptime(milliseconds: snapshot.uptimeMilliseconds))
      page.element("p", "since " + StatusFormat.utc(secondsSince1970: figures.startTimeSeconds))
    }
    page.markup("</section>\n")
  }

  private static func commitLatency(_ snapshot: Snapshot, window: String, into page: inout HTMLWriter) {
    let recent = snapshot.rates?.commits
    if let recent, let mean = recent.mean {
      page.element("p", [("class", "big"), ("data-commit", "mean")], StatusFormat.duration(mean))
      page.markup("<p>")
      page.text("mean of ")
      page.element("span", [("data-commit", "count")], StatusFormat.count(recent.count))
      page.text(" \(recent.count == 1 ? "commit" : "commits"), \(window) · p99 ")
      switch recent.bound(quantile: 0.99) {
      case .atMost(let bound)?: page.text("≤ " + StatusFormat.duration(bound))
      case .above(let bound)?: page.text("> " + StatusFormat.duration(bound))
      case nil: page.text("–")
      }
    } else {
      page.element("p", [("class", "big"), ("data-commit", "mean")], "–")
      page.markup("<p>")
      page.text("no commit, \(window)")
    }
    page.markup("<br>since start: ")
    page.element(
      "span",
      [
        ("data-metric", "pagesync_broker_batch_commit_seconds_count"),
        ("data-value", "\(snapshot.commits.count)"),
      ],
      StatusFormat.count(snapshot.commits.count))
    page.text(" commits, mean " + (snapshot.commits.mean.map(StatusFormat.duration) ?? "–"))
    page.markup("</p>")
  }

  private static func totals(_ snapshot: Snapshot, into page: inout HTMLWriter) {
    let figures = snapshot.figures
    var rows: [(label: String, metric: String, value: Int, bytes: Bool)] = [
      ("batches applied", "pagesync_broker_batches_applied_total", figures.batchesApplied, false),
      ("notifications sent", "pagesync_broker_notifications_sent_total", figures.notificationsSent, false),
      (
        "notifications coalesced", "pagesync_broker_notifications_coalesced_total",
        figures.notificationsCoalesced, false
      ),
      (
        "catch-ups answered from the index", "pagesync_broker_catchups_from_index_total",
        figures.catchUpsFromIndex, false
      ),
      (
        "subscribed pages read from the store", "pagesync_broker_subscribe_store_reads_pages_total",
        figures.subscribeStoreReads, false
      ),
      ("bytes received", "pagesync_broker_received_bytes_total", figures.bytesReceived, true),
      ("bytes sent", "pagesync_broker_sent_bytes_total", figures.bytesSent, true),
    ]
    // The bus between brokers, when there is one ([bus]): its state and what crossed it.
    if figures.bus.kind == "redis" {
      rows += [
        (
          "bus live (redis: \(figures.bus.state))", "pagesync_broker_bus_connected",
          figures.bus.connected ? 1 : 0, false
        ),
        (
          "bus messages published", "pagesync_broker_bus_published_messages_total", figures.bus.published,
          false
        ),
        ("bus messages received", "pagesync_broker_bus_received_messages_total", figures.bus.received, false),
        ("bus messages refused", "pagesync_broker_bus_refused_messages_total", figures.bus.refused, false),
        ("bus messages dropped", "pagesync_broker_bus_dropped_messages_total", figures.bus.dropped, false),
        ("bus reconnects", "pagesync_broker_bus_reconnects_total", figures.bus.reconnects, false),
        ("bus catch-ups of every device", "pagesync_broker_bus_catchups_total", figures.bus.catchUps, false),
      ]
    }
    for (code, count) in figures.responses.seen(in: 400...599) {
      rows.append(
        ("HTTP \(code) answers", "pagesync_broker_http_refused_total{status=\"\(code)\"}", count, false))
    }
    page.markup("<h2>Since start</h2>\n<table class=\"totals\">\n")
    for row in rows {
      page.open("tr")
      page.element("th", row.label)
      page.element(
        "td", [("data-metric", row.metric), ("data-value", "\(row.value)")],
        row.bytes ? StatusFormat.bytes(row.value) : StatusFormat.count(row.value))
      page.element("td", [("class", "metric")], row.metric)
      page.markup("</tr>\n")
    }
    page.markup("</table>\n")
  }

  private static func configuration(_ keys: [(key: String, value: String)], into page: inout HTMLWriter) {
    page.markup("<h2>Configuration in force</h2>\n<table class=\"config\">\n")
    for (key, value) in keys {
      page.open("tr")
      page.element("th", key)
      page.open("td", [("data-key", key)])
      page.text(value)
      // A size in bytes as the file writes it, and in the units people read.
      if key.hasSuffix("_bytes"), let bytes = Int(value), bytes >= 1024 {
        page.element("span", [("class", "hint")], " (\(StatusFormat.bytes(bytes)))")
      }
      page.close("td")
      page.markup("</tr>\n")
    }
    page.markup("</table>\n")
  }

  // MARK: Pieces

  private static func card(_ title: String, into page: inout HTMLWriter, _ body: (inout HTMLWriter) -> Void) {
    page.markup("<div class=\"card\">")
    page.element("h2", title)
    body(&page)
    page.markup("</div>\n")
  }

  /// A count that `/metrics` exports as `metric`: shown grouped, its exact value in `data-value`.
  private static func figure(_ metric: String, _ value: Int, big: Bool = false, into page: inout HTMLWriter) {
    var attributes: [(StaticString, String)] = [("data-metric", metric), ("data-value", "\(value)")]
    if big {
      attributes.insert(("class", "big"), at: 0)
      page.element("p", attributes, StatusFormat.count(value))
    } else {
      page.element("span", attributes, StatusFormat.count(value))
    }
  }

  /// A rate as the card's big figure (`–` before the window has two samples), then opens the line below it.
  private static func rate(_ name: String, _ value: Double?, into page: inout HTMLWriter) {
    var attributes: [(StaticString, String)] = [("class", "big"), ("data-rate", name)]
    if let value { attributes.append(("data-value", "\(value)")) }
    page.element("p", attributes, value.map(StatusFormat.perSecond) ?? "–")
    page.markup("<p>")
  }

  /// Inline: the page needs no other request. Light or dark after the reader's setting.
  private static let stylesheet: StaticString = """
    <style>
    :root{color-scheme:light dark;--bg:#f6f7f9;--card:#fff;--ink:#1d2329;--dim:#5b6570;--line:#dde1e6;--accent:#1f6feb}
    @media (prefers-color-scheme:dark){:root{--bg:#111418;--card:#1a1f25;--ink:#e6e9ed;--dim:#9aa4ae;--line:#2c333b;--accent:#58a6ff}}
    *{box-sizing:border-box}
    body{margin:0;padding:20px 28px;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
    header h1{margin:0 0 2px;font-size:20px}
    header p,footer{margin:0;color:var(--dim)}
    header strong,header code{color:var(--ink)}
    code,.metric{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
    .cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:12px;margin:16px 0}
    .card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
    .card h2{margin:0;font-size:12px;font-weight:600;text-transform:uppercase;letter-spacing:.04em;color:var(--dim)}
    .card p{margin:2px 0 0;color:var(--dim)}
    .card p.big{margin:4px 0 2px;font-size:28px;font-weight:600;color:var(--accent);font-variant-numeric:tabular-nums}
    .card span{color:var(--ink);font-variant-numeric:tabular-nums}
    h2{font-size:15px;margin:18px 0 6px}
    table{border-collapse:collapse;background:var(--card);border:1px solid var(--line);border-radius:8px}
    th,td{padding:3px 12px;border-bottom:1px solid var(--line);text-align:left;vertical-align:baseline}
    th{font-weight:500}
    td{font-variant-numeric:tabular-nums}
    .totals td[data-value]{text-align:right}
    .metric{color:var(--dim)}
    .hint{color:var(--dim)}
    .config th{vertical-align:baseline;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
    footer{margin-top:16px;font-size:12px}
    a{color:var(--accent)}
    </style>
    """
}
