import DaemonCore
import SyncProtocol

/// The bearer token: which one a connection presents (`TokenStateMachine` decides), reading the file or running
/// the command when it says, and what the broker's refusals mean. A refused token is never retried at once: the
/// connection is lost, and the reconnect, after the backoff delay, gets a fresh token and catches up as after any
/// reconnect (nothing queued is lost, nothing is downloaded again that did not change). The token itself is
/// never logged or stored. Loop thread only.
extension SyncDriver {
  /// The machine asked for a connection: with the token, once there is one.
  func openConnectionWithToken() {
    performToken(tokens.connectionWanted())
  }

  func performToken(_ actions: [TokenStateMachine.Action]) {
    for action in actions {
      switch action {
      case .connect(let token):
        useToken(token)
        // Only if the machine still waits for this connection (it may have stopped while the file was read).
        if machine.state == .connecting { openConnection() }
      case .refresh(let number):
        tokenReader.read(configuration) { [weak self] result in
          guard let self else { return }
          switch result {
          case .success(let token):
            performToken(tokens.refreshed(token, number: number))
          case .failure(let error):
            counters.tokenFailures += 1
            logger.warning("cannot get a token", metadata: ["error": "\(error)"])
            performToken(tokens.refreshFailed(error.description, number: number))
          }
        }
      case .fail(let reason):
        guard machine.state == .connecting else { continue }
        lastError = "no usable token: \(reason)"
        handle(.connectionFailed(now: loop.now, reason: lastError!))
      case .reconnect:
        if let token = tokens.current { useToken(token) }
        if machine.state != .disconnected && machine.state != .idle && machine.state != .stopped {
          dropConnection(
            "the token changed; reconnecting with the new one", generation: generation, brokerLost: false)
        }
        handle(.reconnectNow)
      }
    }
  }

  /// Requests and the streams opened from now on present `token`.
  private func useToken(_ token: String) {
    guard token != linkToken else { return }
    linkToken = token
    link.update(token: token, timeoutMillis: UInt64(configuration.requestTimeoutSeconds) * 1000)
  }

  /// An app hands a token (`PUT /v1/token`): it wins over the configured source until the broker refuses it.
  func hand(token: String) {
    logger.info("a token was handed by the local API", metadata: ["bytes": "\(token.utf8.count)"])
    let actions = tokens.hand(token)
    performToken(actions)
    // A batch refused for the old token may pass now.
    if !actions.isEmpty { handle(.mutationsQueued) }
  }

  /// The app withdraws its token (`DELETE /v1/token`): the configured source is used again.
  func withdrawToken() {
    logger.info("the token handed by the local API was withdrawn")
    performToken(tokens.withdraw())
  }

  /// The broker refused the token in use (`reason`: the status or close code and the broker's message, `401 the
  /// token is not valid`, `4401 token expired`): `status` says so until a token is accepted.
  func tokenRefused(_ reason: String) {
    counters.tokenRefusals += 1
    tokens.refused(reason: reason)
    lastError = tokens.problem
    logger.warning(
      "the broker refused the token", metadata: ["source": "\(tokens.origin)", "reason": "\(reason)"])
  }

  /// If `error` is the broker refusing the token (401) on a request of the connection `expected`: records it and
  /// drops the connection (the reconnect gets a fresh token and catches up). Returns whether it was.
  func refusedToken(_ error: BrokerLinkError, generation expected: Int) -> Bool {
    guard case .status(401, let message) = error else { return false }
    guard expected == generation else { return true }
    tokenRefused("401 \(message)")
    let problem = lastError ?? message
    dropConnection(problem, generation: expected, brokerLost: false)
    lastError = problem
    return true
  }

  /// Whether the broker closed the device stream because of its token: 4401 `token expired` (a JSON Web Token's
  /// `exp` passed), 1008 `token revoked` (a reload removed it) or 1008 `not authorized` (the stream opened as a
  /// reload removed it). Other 1008s (`access changed; subscribe again`, a frame too slow) are not the token's.
  static func refusesToken(_ close: BrokerStreamClose) -> Bool {
    guard close.byBroker else { return false }
    if close.code == BrokerStreamClose.tokenExpiredCode { return true }
    let refusals: [BrokerProtocol.StreamCloseReason] = [.tokenRevoked, .notAuthorized]
    return refusals.contains { close.code == $0.code && close.reason == $0.reason }
  }
}
