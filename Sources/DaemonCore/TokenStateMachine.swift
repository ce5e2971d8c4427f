/// Which bearer token the daemon presents to the broker, and when it gets a fresh one: I/O-free, as
/// `SyncStateMachine`, whose connection attempts it serves. The wiring reads the file or runs the command
/// (`refresh`) and reports back; it never decides.
///
///     connection wanted ──▶ a handed token (PUT /v1/token)? ─────────────▶ connect(it)
///                           source `token` (fixed)? ─────────────────────▶ connect(it)
///                           a token read from the source, not refused? ──▶ connect(it)
///                           otherwise ──▶ refresh (the connection waits) ──▶ refreshed: connect(it)
///                                                                       └─▶ failed: fail(why) (the sync
///                                                                            machine's backoff retries)
///     refused (401, close 4401, close 1008 `token revoked`) ──▶ a handed token is dropped (the source wins
///                           again); a token from the file or command is stale: refreshed at the next attempt
///
/// - **Which source wins.** A token handed by the local API wins over the configured source until the broker
///   refuses it. `[broker] token`, `token_file` and `token_command` are exclusive (the configuration says so).
/// - **No spinning.** A refusal never refreshes or reconnects by itself: the connection is lost, the sync
///   machine schedules the reconnect with its backoff, and only that attempt (`connectionWanted`) reads the file
///   or runs the command again. A token that stays refused after a refresh therefore waits longer each time, and
///   a command that keeps failing runs once per backoff delay.
/// - **Eager refreshes.** A reload (`reconfigure`) reads the source again at once; if the token differs from the
///   one the connection uses, `reconnect`. A handed token that differs does the same. Neither comes from the
///   broker, so neither can loop.
///
/// Owned by the daemon's loop thread.
public struct TokenStateMachine: Sendable, Equatable {
  /// Where the configured token comes from (`[broker]`).
  public enum Source: Sendable, Equatable {
    /// `token`: this one (empty: no token, for a broker without tokens).
    case fixed(String)
    /// `token_file`: read when needed.
    case file
    /// `token_command`: run when needed.
    case command
  }

  /// What the wiring must do.
  public enum Action: Sendable, Equatable {
    /// Open the connection with this token (empty: none).
    case connect(token: String)
    /// Read the file or run the command; answer `refreshed` or `refreshFailed` with this number.
    case refresh(Int)
    /// There is no usable token: report the connection attempt failed, with why.
    case fail(String)
    /// The token to use changed while a connection uses (or is opening with) another: drop it and reconnect now.
    case reconnect
  }

  public private(set) var source: Source
  /// The token handed by the local API (`PUT /v1/token`), until the broker refuses it. Never stored.
  public private(set) var handed: String?
  /// The last token read from the file or printed by the command.
  public private(set) var sourced: String?
  /// The token the current (or last) connection was opened with.
  public private(set) var inUse: String?
  /// Why there is no usable token, or why the last one was refused, for `status`; nil once one is accepted.
  public private(set) var problem: String?
  /// The number of the refresh under way, nil when none is.
  public private(set) var refreshing: Int?
  /// `sourced` must be read again before it is used (never read, refused, or a reload).
  private var stale = true
  /// A connection waits for the refresh under way.
  private var waiting = false
  private var lastRefresh = 0

  public init(source: Source) {
    self.source = source
  }

  /// The token a connection opened now would present, if known without a refresh.
  public var current: String? {
    if let handed { return handed }
    switch source {
    case .fixed(let token): return token
    case .file, .command: return stale ? nil : sourced
    }
  }

  /// Where `current` comes from, for `status`: `api`, `token`, `token_file`, `token_command` or `none`.
  public var origin: String {
    if handed != nil { return "api" }
    switch source {
    case .fixed(let token): return token.isEmpty ? "none" : "token"
    case .file: return "token_file"
    case .command: return "token_command"
    }
  }

  /// The sync machine asks for a connection (`openConnection`).
  public mutating func connectionWanted() -> [Action] {
    if let token = current {
      inUse = token
      return [.connect(token: token)]
    }
    waiting = true
    return refreshing == nil ? [startRefresh()] : []
  }

  /// The refresh numbered `number` read `token` (one line, checked by the wiring).
  public mutating func refreshed(_ token: String, number: Int) -> [Action] {
    guard refreshing == number else { return [] }
    refreshing = nil
    sourced = token
    stale = false
    return afterRefresh()
  }

  /// The refresh numbered `number` failed: why (the command's exit status, a timeout, an empty file…).
  public mutating func refreshFailed(_ reason: String, number: Int) -> [Action] {
    guard refreshing == number else { return [] }
    refreshing = nil
    problem = reason
    guard waiting else { return [] }
    waiting = false
    // A handed token may have come while the source was read.
    if let handed {
      inUse = handed
      return [.connect(token: handed)]
    }
    return [.fail(reason)]
  }

  /// The broker refused the token in use (`reason`: its answer or close reason). Nothing happens now: the
  /// connection is lost, and the reconnect (after the backoff delay) gets a fresh token.
  public mutating func refused(reason: String) {
    guard let token = inUse else { return }
    if token == handed {
      handed = nil
      problem = "the broker refused the token handed by PUT /v1/token (\(reason)); using the configured one"
      return
    }
    switch source {
    case .fixed(let fixed):
      problem =
        fixed.isEmpty
        ? "the broker wants a token (\(reason)): set [broker] token, token_file or token_command, or PUT /v1/token"
        : "the broker refused [broker] token (\(reason)); tried again after the backoff delay (reload a new one, "
          + "or PUT /v1/token)"
    case .file:
      if sourced == token { stale = true }
      problem = "the broker refused the token read from [broker] token_file (\(reason)); reading it again"
    case .command:
      if sourced == token { stale = true }
      problem = "the broker refused the token [broker] token_command printed (\(reason)); running it again"
    }
  }

  /// The broker accepted the token in use (the stream opened).
  public mutating func accepted() {
    problem = nil
  }

  /// An app handed a token (`PUT /v1/token`): it wins from now on.
  public mutating func hand(_ token: String) -> [Action] {
    handed = token
    problem = nil
    if waiting {
      waiting = false
      inUse = token
      return [.connect(token: token)]
    }
    return token == inUse ? [] : [.reconnect]
  }

  /// The app withdraws its token (`DELETE /v1/token`, its user signed out): the configured source is used again,
  /// reconnecting if the connection presents the withdrawn token.
  public mutating func withdraw() -> [Action] {
    guard let withdrawn = handed else { return [] }
    handed = nil
    problem = nil
    return withdrawn == inUse && current != inUse ? [.reconnect] : []
  }

  /// A reload: the token settings, re-read. The file is read (the command run) again at once, whether or not the
  /// settings changed: an operator reloads to make the daemon take a new token.
  public mutating func reconfigure(_ new: Source) -> [Action] {
    source = new
    switch new {
    case .fixed:
      sourced = nil
      stale = true
      // A refresh of the old source under way is answered to nobody.
      refreshing = nil
      if waiting, let token = current {
        waiting = false
        inUse = token
        return [.connect(token: token)]
      }
      return handed == nil && current != inUse ? [.reconnect] : []
    case .file, .command:
      stale = true
      return [startRefresh()]
    }
  }

  private mutating func startRefresh() -> Action {
    lastRefresh += 1
    refreshing = lastRefresh
    return .refresh(lastRefresh)
  }

  private mutating func afterRefresh() -> [Action] {
    guard let token = current else { return [] }
    if waiting {
      waiting = false
      inUse = token
      return [.connect(token: token)]
    }
    // An eager refresh (a reload): a new token replaces the connection's.
    return token == inUse ? [] : [.reconnect]
  }
}
