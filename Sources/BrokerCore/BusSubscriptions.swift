/// Which bus channels a broker needs: one per workspace that the grant of at least one of its open device streams
/// names, plus the `resync` channel (docs/architecture.md, "The bus": why per workspace and by grant).
///
/// A count of holders per workspace: a stream opening holds its grant's workspaces, closing (or a reload changing
/// its grant) releases them; each call returns the channels to SUBSCRIBE or UNSUBSCRIBE now. By grant rather than
/// by followed page, because a device may follow a page that does not exist yet (its workspace unknown here) and
/// that another broker then creates: the grant already names that page's workspace.
///
/// I/O-free; owned by the broker's loop thread.
public struct BusSubscriptions: Sendable, Equatable {
  private var holders: [String: Int] = [:]

  public init() {}

  /// Workspaces held by at least one stream.
  public var workspaceCount: Int { holders.count }

  /// Every channel needed now (to subscribe after a reconnect): the `resync` channel first, then the workspaces'
  /// in a stable order.
  public var channels: [String] {
    [BusMessage.resyncChannel] + holders.keys.sorted().map(BusMessage.channel(ofWorkspace:))
  }

  /// Whether some stream holds `workspace`.
  public func holds(_ workspace: String) -> Bool { holders[workspace] != nil }

  /// One more holder of each of `workspaces`; returns the channels newly needed (to SUBSCRIBE).
  public mutating func hold(_ workspaces: some Sequence<String>) -> [String] {
    var added: [String] = []
    for workspace in workspaces {
      holders[workspace, default: 0] += 1
      if holders[workspace] == 1 { added.append(BusMessage.channel(ofWorkspace: workspace)) }
    }
    return added
  }

  /// One holder fewer of each of `workspaces` (each held before); returns the channels no longer needed (to
  /// UNSUBSCRIBE).
  public mutating func release(_ workspaces: some Sequence<String>) -> [String] {
    var removed: [String] = []
    for workspace in workspaces {
      guard let count = holders[workspace] else { continue }
      if count <= 1 {
        holders[workspace] = nil
        removed.append(BusMessage.channel(ofWorkspace: workspace))
      } else {
        holders[workspace] = count - 1
      }
    }
    return removed
  }
}
