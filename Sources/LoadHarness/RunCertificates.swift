import EventLoopTestKit
import LoadCore
import Web

/// A `--tls` run's throwaway certificate authority and the server certificate it signs (`DNS:localhost`,
/// `IP:127.0.0.1`), made with the `openssl` command in a temporary directory when the run starts and deleted
/// with it: both servers (the broker's `[server.tls]`, redis-server's `--tls-cert-file`) present the same pair,
/// and the harness's clients trust that CA alone. No key outlives the run.
///
/// Threading: made and used on the thread that runs the harness.
final class RunCertificates {
  private let authority: TestCertificates
  let certificateFile: String
  let keyFile: String
  var caFile: String { authority.caFile }

  init() throws(LoadError) {
    do {
      authority = try TestCertificates(label: "load-tls")
      (certificateFile, keyFile) = try authority.issue("server")
    } catch {
      throw .serverFailed("cannot make the run's test CA with the openssl command: \(error)")
    }
  }

  /// A client context that trusts this CA only: one per target, so that each side's tally of handshakes is its
  /// own.
  func clientContext() throws(LoadError) -> TLSClientContext {
    do { return try TLSClientContext(caFile: caFile) } catch {
      throw .serverFailed("cannot make a TLS client context: \(error)")
    }
  }

  func remove() { authority.remove() }
}

extension ReportValue {
  /// `report` with a `tls` section: the handshakes the harness's connections completed and how many resumed a
  /// session (none of a plain run: `enabled` false).
  static func withTLS(_ report: ReportValue, _ context: TLSClientContext?) -> ReportValue {
    guard case .object(var fields) = report else { return report }
    let tally = context?.handshakes ?? TLSHandshakeTally()
    let section = ReportValue.object([
      ("enabled", .bool(context != nil)), ("handshakes", .int(tally.completed)),
      ("resumed", .int(tally.resumed)),
    ])
    // Before the verdict, which a report ends with.
    let at = fields.firstIndex { $0.0 == "ok" } ?? fields.endIndex
    fields.insert(("tls", section), at: at)
    return .object(fields)
  }
}
