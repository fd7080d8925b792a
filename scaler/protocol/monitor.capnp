@0xd5e2a7c4b9f13068;

# The scheduler's monitor feed. Every ZeroMQ message on the monitor PUB socket has two frames: the
# topic as ASCII text ("status", "transitions", "decisions") and one encoded `FeedMessage`.
# docs/protocol.md ("Monitor feed") describes it; scaler/protocol/feed.py holds the Python values.
#
# `FeedMessage.version` is field @0 of the root struct and never moves: a reader of any version reads
# it first and refuses a feed whose version it does not know. Times are seconds; sizes are bytes.

struct FeedMessage {
  version @0 :UInt32;
  wallTime @1 :Float64;           # Unix time of the publication
  union {
    status @2 :SchedulerView;
    transitions @3 :TransitionBatch;
    decision @4 :ScalingDecision;
  }
}

struct Capability {
  name @0 :Text;
  value @1 :Int64;                # -1 means "present, no quantity"
}

struct TaskCounts {
  waiting @0 :UInt64;
  queued @1 :UInt64;
  running @2 :UInt64;
  canceling @3 :UInt64;
  success @4 :UInt64;
  failed @5 :UInt64;
  canceled @6 :UInt64;
  workerDied @7 :UInt64;
  notFound @8 :UInt64;
}

struct MessageCount {
  type @0 :Text;                  # message type name, e.g. "TaskResult"
  count @1 :UInt64;
}

struct SchedulerStats {
  address @0 :Text;
  cpuPercent @1 :Float32;
  rssBytes @2 :UInt64;
  objectCount @3 :UInt64;
  objectBytes @4 :UInt64;
  messagesSent @5 :List(MessageCount);
  messagesReceived @6 :List(MessageCount);
  graphs @7 :UInt32;
}

struct TaskGroup {
  capabilities @0 :List(Capability);
  queued @1 :UInt32;
  running @2 :UInt32;
  oldestQueuedSeconds @3 :Float64;
  reason @4 :Text;                # why the queued tasks wait; empty when none is queued
}

struct ProcessorStatus {
  pid @0 :UInt32;
  cpuPercent @1 :Float32;
  rssBytes @2 :UInt64;
  state @3 :Text;
}

struct Worker {
  workerId @0 :Data;
  hostname @1 :Text;
  pid @2 :UInt32;
  managerId @3 :Text;
  capabilities @4 :List(Capability);
  capacity @5 :UInt32;
  assigned @6 :UInt32;            # sent by the scheduler, not ended yet
  queued @7 :UInt32;              # from its heartbeat: held there, not started
  running @8 :UInt32;
  blocked @9 :UInt32;
  freeMemoryBytes @10 :UInt64;
  processors @11 :List(ProcessorStatus);
  cpuPercent @12 :Float32;        # its agent
  rssBytes @13 :UInt64;
  lagSeconds @14 :Float64;        # heartbeat round trip
  lastSeenSeconds @15 :Float64;
  connectedSeconds @16 :Float64;
}

struct TargetEntry {
  capabilities @0 :List(Capability);
  workers @1 :UInt32;
}

struct Manager {
  managerId @0 :Text;
  managerType @1 :Text;
  capabilities @2 :List(Capability);
  union {
    unlimited @3 :Void;
    maxWorkers @4 :UInt32;
  }
  hasTarget @5 :Bool;             # false until the first target was sent
  target @6 :List(TargetEntry);
  units @7 :UInt32;
  pendingUnits @8 :UInt32;
  connectedWorkers @9 :UInt32;
  secondsSinceHeartbeat @10 :Float64;
}

struct Client {
  clientId @0 :Data;
  name @1 :Text;
  hostname @2 :Text;
  pid @3 :UInt32;
  tasks @4 :TaskCounts;
}

struct Function {
  functionName @0 :Text;
  tasks @1 :TaskCounts;
}

struct ScalingDecision {
  wallTime @0 :Float64;
  managerId @1 :Text;
  policy @2 :Text;
  workersBefore @3 :UInt32;
  workersAfter @4 :UInt32;
  reason @5 :Text;
}

struct SchedulerView {
  now @0 :Float64;                # the scheduler's monotonic clock
  wallTime @1 :Float64;
  scheduler @2 :SchedulerStats;
  tasks @3 :TaskCounts;
  groups @4 :List(TaskGroup);
  workers @5 :List(Worker);
  managers @6 :List(Manager);
  clients @7 :List(Client);
  functions @8 :List(Function);
  decisions @9 :List(ScalingDecision);
  managerTimeoutSeconds @10 :Float64;
}

enum TaskStatus {
  waiting @0;
  queued @1;
  running @2;
  canceling @3;
  success @4;
  failed @5;
  canceled @6;
  workerDied @7;
}

struct TransitionBatch {
  # One transition per index of the four lists (they have the same length), oldest first.
  taskIds @0 :List(Data);
  statuses @1 :List(TaskStatus);
  workerIds @2 :List(Data);       # empty when no worker holds (held) the task
  wallTimes @3 :List(Float64);
  dropped @4 :UInt64;             # transitions over the per-batch limit since the previous batch
}
