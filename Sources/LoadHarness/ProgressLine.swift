import LoadCore

/// The live progress line on stderr: redrawn in place on a terminal, otherwise a line at most once a second.
final class ProgressLine {
  private let enabled: Bool
  private let terminal = HostProcess.standardErrorIsTerminal
  private var lastWritten: UInt64 = 0
  private var shown = false

  init(enabled: Bool) { self.enabled = enabled }

  func update(_ text: String) {
    guard enabled else { return }
    let now = HostProcess.now()
    if terminal {
      guard now - lastWritten >= 100_000_000 else { return }
      HostProcess.writeError("\r\u{1B}[K" + text)
      shown = true
    } else {
      guard now - lastWritten >= 1_000_000_000 else { return }
      HostProcess.writeError(text + "\n")
    }
    lastWritten = now
  }

  /// Ends the redrawn line before other output.
  func clear() {
    if terminal, shown { HostProcess.writeError("\r\u{1B}[K") }
    shown = false
  }
}

/// The machine around a run: its CPUs and how loaded it was at the start and the end. Figures from a run whose
/// load average exceeds the core count were taken while other work competed for the CPUs.
struct MachineProbe {
  let loadAtStart = HostProcess.loadAverage()

  var report: ReportValue {
    .object([
      ("cores", .int(HostProcess.cores)), ("loadavg_1m_start", .number(loadAtStart ?? 0)),
      ("loadavg_1m_end", .number(HostProcess.loadAverage() ?? 0)),
    ])
  }
}

/// Samples the server under test from /proc when the harness knows its pid (it started it).
struct ServerProbe {
  var pid: Int32?

  func sample() -> ProcessSample? { pid.flatMap { HostProcess.sample(pid: $0) } }

  /// `{pid, rss_before_bytes, rss_after_bytes, rss_peak_bytes, cpu_seconds, cpu_pct}`, or `{"measured": false}`
  /// for a server the harness did not start.
  func report(before: ProcessSample?, after: ProcessSample?, wallSeconds: Double) -> ReportValue {
    guard let pid, let before, let after else { return .object([("measured", .bool(false))]) }
    let cpu = after.cpuSeconds - before.cpuSeconds
    return .object([
      ("pid", .int(Int(pid))), ("rss_before_bytes", .int(before.residentBytes)),
      ("rss_after_bytes", .int(after.residentBytes)), ("rss_peak_bytes", .int(after.peakResidentBytes)),
      ("cpu_seconds", .number(cpu)), ("cpu_pct", .number(cpu / max(wallSeconds, 1e-9) * 100)),
    ])
  }
}
