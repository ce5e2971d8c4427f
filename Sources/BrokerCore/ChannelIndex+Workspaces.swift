// The workspace of each live channel's page, remembered once learned.
//
// A page never changes workspace, so once the broker has read a page's workspace from the store (or seen it in a
// commit) the answer holds for as long as the channel lives. The broker decides a subscription from it without a
// store read; it is dropped with the key (a released key may later stand for another page).

extension ChannelIndex {
  /// A workspace as the index numbers it: compare numbers instead of hashing ids on a hot path.
  public struct WorkspaceNumber: Hashable, Sendable {
    public let rawValue: UInt16
  }

  /// The workspace of a live key's page, if the index has been told it.
  public func workspace(of key: PageKey) -> WorkspaceNumber? {
    guard isLive(key) else { return nil }
    let number = nameRefs[Int(key.rawValue)].workspace
    return number == Self.unknownWorkspace ? nil : WorkspaceNumber(rawValue: number)
  }

  /// The id of a workspace number.
  public func workspaceID(_ number: WorkspaceNumber) -> String {
    workspaceIDs[Int(number.rawValue)]
  }

  /// Records the workspace of a live key's page; the caller must know it from the store or a commit. Does nothing
  /// for a key that is not live, or once 65,535 workspaces are numbered (their pages then stay unknown: the broker
  /// asks the store, as for any page it has not learned).
  public mutating func setWorkspace(_ workspace: String, of key: PageKey) {
    guard isLive(key), nameRefs[Int(key.rawValue)].workspace == Self.unknownWorkspace else { return }
    let number: UInt16
    if let known = workspaceNumbers[workspace] {
      number = known
    } else {
      guard workspaceIDs.count < Int(Self.unknownWorkspace) else { return }
      number = UInt16(workspaceIDs.count)
      workspaceIDs.append(workspace)
      workspaceNumbers[workspace] = number
    }
    nameRefs[Int(key.rawValue)].workspace = number
  }
}
