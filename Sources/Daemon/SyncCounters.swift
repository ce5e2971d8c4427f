/// What the daemon did since it started (`GET /v1/status`, `pagesync status`; docs/operations.md, "Metrics").
struct SyncCounters: Sendable, Equatable {
  /// Device stream connections tried (the first, then one per reconnect).
  var connectionAttempts = 0
  /// Device streams that opened.
  var streamsOpened = 0
  /// Page notifications received on the stream (pages named in `changed` frames).
  var notificationsReceived = 0
  /// `POST /v1/catchup` requests sent: one per connection, and one per sync request's check.
  var catchUpRequests = 0
  /// `POST /v1/fetch` requests sent (each page of a paginated fetch is one).
  var fetchRequests = 0
  /// Batches the broker answered (`POST /v1/batch` with a 200).
  var batchesPushed = 0
  /// Mutations in those batches (applied, re-sent or rejected).
  var mutationsPushed = 0
  /// Mutations of those batches the broker rejected.
  var mutationsRejected = 0
  /// Pushes that failed (unreachable broker, an error status): their mutations stay queued.
  var pushFailures = 0
  /// Times the broker refused the token (401, close 4401 `token expired`, close 1008 `token revoked`).
  var tokenRefusals = 0
  /// Reads of `token_file` and runs of `token_command` that gave no token.
  var tokenFailures = 0

  /// Connection attempts after the first: each follows a lost stream or a failed attempt.
  var reconnects: Int { max(0, connectionAttempts - 1) }
}
