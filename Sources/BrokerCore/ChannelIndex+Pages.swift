// What the broker knows of each live channel's page: its workspace and its newest `lastUpdatedTime`.
//
// A page never changes workspace, and its time only grows, so what the broker has read from the store or seen in
// a commit holds, once the newest is kept, for as long as the channel lives. The broker decides subscriptions
// from it without a store read, and answers catch-ups for pages it knows (`BrokerServer.catchUp`). It goes with
// the key (a released key may later stand for another page).

extension ChannelIndex {
  /// A workspace as the index numbers it: compare numbers instead of hashing ids on a hot path.
  public struct WorkspaceNumber: Hashable, Sendable {
    public let rawValue: UInt16
  }

  /// What the index knows of a page.
  public struct PageFacts: Equatable, Sendable {
    public var workspace: WorkspaceNumber
    public var lastUpdated: UInt64
  }

  /// The workspace and newest time of a live key's page, if the index has learned them.
  public func facts(of key: PageKey) -> PageFacts? {
    guard isLive(key) else { return nil }
    let ref = nameRefs[Int(key.rawValue)]
    guard ref.workspace != Self.unknownWorkspace else { return nil }
    return PageFacts(workspace: WorkspaceNumber(rawValue: ref.workspace), lastUpdated: ref.lastUpdated)
  }

  /// The workspace of a live key's page, if the index has learned it.
  public func workspace(of key: PageKey) -> WorkspaceNumber? { facts(of: key)?.workspace }

  /// The number of a workspace id, if a page of it has been learned.
  public func number(ofWorkspace id: String) -> WorkspaceNumber? {
    workspaceNumbers[id].map(WorkspaceNumber.init(rawValue:))
  }

  /// The id of a workspace number.
  public func workspaceID(_ number: WorkspaceNumber) -> String {
    workspaceIDs[Int(number.rawValue)]
  }

  /// Records what the store or a commit says of a live key's page: its workspace (kept from the first time: a
  /// page never changes workspace) and a `lastUpdatedTime` (the newest is kept, so a read that raced a commit
  /// cannot take the page back). Does nothing for a key that is not live, or once 65,535 workspaces are numbered
  /// (their pages then stay unknown: the broker asks the store, as for any page it has not learned).
  ///
  /// Returns the number of the page's workspace (nil in those two cases), so that a caller about to check
  /// subscribers against it need not hash the workspace's id again.
  @discardableResult
  public mutating func learn(workspace: String, lastUpdated: UInt64, of key: PageKey) -> WorkspaceNumber? {
    guard isLive(key) else { return nil }
    let index = Int(key.rawValue)
    if nameRefs[index].workspace == Self.unknownWorkspace {
      let number: UInt16
      if let known = workspaceNumbers[workspace] {
        number = known
      } else {
        guard workspaceIDs.count < Int(Self.unknownWorkspace) else { return nil }
        number = UInt16(workspaceIDs.count)
        workspaceIDs.append(workspace)
        workspaceNumbers[workspace] = number
      }
      nameRefs[index].workspace = number
    }
    nameRefs[index].lastUpdated = Swift.max(nameRefs[index].lastUpdated, lastUpdated)
    return WorkspaceNumber(rawValue: nameRefs[index].workspace)
  }
}
