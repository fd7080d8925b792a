@0xb3f1c2d4e5a69788;

# The scheduler protocol. Every ZeroMQ frame exchanged with the scheduler (and between a worker
# agent and its processors) holds one encoded `Message`, or, since protocol version 3, several back to back
# (Cap'n Proto's stream framing: each message's segment table gives its length), a sender's batch of small
# messages joined in one part. Several frames for the same peer may travel as one multipart ZeroMQ message.
#
# Conventions: ids are opaque bytes; times are seconds (Float64); sizes are bytes.
# docs/protocol.md describes every message, its fields and its direction, and how to add one.
# The Python values and codec are generated from this file (python -m scaler.protocol.generate): the order in which
# a struct declares its fields is the order of its Python attributes; ordinals decide the wire.

using Storage = import "object_storage.capnp";

const protocolVersion :UInt32 = 8;
  # Every hello carries it; peers of another version are refused. Raise it with any change an older peer cannot read:
  # a new message, union member or enumerant it would receive, or a changed meaning (docs/protocol.md, section 4.6).
  # Version 4: one route; every task reaches its processor on the processor's own link (docs/protocol.md section 3.7).
  # Version 5: the scheduler gives each worker its heartbeat period, longer with more workers (HeartbeatEcho's
  # heartbeatIntervalSeconds; docs/protocol.md section 3.4).
  # Version 6: host caches (docs/architecture.md, "One copy per host"): HelloReply's objectStorageServerKey; in the
  # storage protocol, StorageHello's cacheAddress, the source request and reply, SegmentDirectory's hostCache, and
  # the caches' hostReport (what each holds and moves, which the storage's info and the monitor feed's status carry).
  # Version 8: a client reads a result from the host cache that holds it: its `source` is answered with the holder's
  # key (ObjectSource.serverKey), and a host cache asks its storage server which keys are clients' (`clientKey`).

const priorityDepthBits :UInt32 = 10;
  # A task's priority is the user's priority shifted left by this many bits, plus its nesting depth (client/sharing.py):
  # `priority >> priorityDepthBits` is the user's priority.

const feedVersion :UInt32 = 1;
  # Version of the monitor feed's content; a reader of another version refuses the feed with a clear message.

struct Capability {
  name @0 :Text;
  value @1 :Int64;          # -1 means "present, no quantity"
}

struct WorkerLimit {
  union {
    unlimited @0 :Void;     # no cap on the number of workers
    limit @1 :UInt32;
  }
}

# ---------------------------------------------------------------- connection set-up

struct Hello {
  protocolVersion @0 :UInt32;
  pythonVersion @1 :Text;   # "3.11.7"; peers must share major.minor with the scheduler
  pid @2 :UInt32;
  hostname @3 :Text;
  role :union {
    client @4 :ClientInfo;
    worker @5 :WorkerInfo;
    manager @6 :ManagerInfo;
    processor @7 :ProcessorInfo;
  }
  knownInstance @8 :Data;   # the scheduler instance this peer was registered with before; empty the first time
}

struct ClientInfo {
  name @0 :Text;
  share @1 :Float64;          # its share of the workers against other clients' (0: the default, 1)
  maxRunningTasks @2 :UInt32; # the most of its tasks at workers at once (0: no quota)
  maxWorkers @3 :UInt32;      # the most workers' worth of spend it holds (0: no quota)
  resumeSeconds @4 :Float64;  # how long it wishes its work to wait for it while it is away, at most the scheduler's window; 0: the scheduler's window; negative: none
}

struct WorkerInfo {
  capabilities @0 :List(Capability);
  capacity @1 :UInt32;      # tasks the scheduler may have assigned to this worker at once, beyond the tasks staged in
                            # its processors and those parked or hosting an actor there (slots, plus one prefetched)
  managerId @2 :Text;       # worker manager that started it; empty when none
  workerType @3 :Text;      # "FIX", "NAT", "ECS", ... (cosmetic)
  heldTasks @4 :List(Data); # retired in version 4 (its processors' hellos name what they hold); sent empty
  lendsProcessors @5 :Bool; # retired in version 4 (every processor takes its tasks on its own link); sent false
  slots @6 :UInt32;         # processors computing at once (0: 1); it keeps this many started, plus ProcessorsWanted
  taskTimeoutSeconds @7 :Float64;  # a task computing longer is stopped and fails timedOut (0: no limit)
  processorPerParent @8 :Bool;     # nested_parents "process": a task waiting on nested tasks keeps its processor
}

struct ManagerInfo {
  managerId @0 :Text;
  capabilities @1 :List(Capability);   # what each worker of this manager advertises
  maxWorkers @2 :WorkerLimit;
  managerType @3 :Text;     # "baremetal_native", "aws_raw_ecs", ...
  workerCostPerHour @4 :Float64;     # what one worker costs, in the user's currency per hour (0: free or unknown)
  expectedBootSeconds @5 :Float64;   # from launch to a connected worker, as declared; negative: not declared (None)
  minWorkers @6 :UInt32;    # workers kept even when idle (warm capacity)
  bufferWorkers @7 :UInt32; # idle workers kept beyond what the queue needs (warm capacity)
}

struct ProcessorInfo {
  # A processor's own link to the scheduler, the one way its tasks come and their answers leave (docs/protocol.md,
  # section 3.7): accepted while its worker is registered; the scheduler takes what it sends as its worker's.
  processorId @0 :Data;     # its name within its worker (the agent's)
  workerId @1 :Data;        # the identity of its worker agent's connection
  lent @2 :Bool;            # retired in version 4 (every processor takes its tasks on its link); sent false
  heldTasks @3 :List(Data); # tasks it holds unfinished, or whose results the scheduler has not named read (its
                            # results are sent again once the hello is accepted): adopted after a restart
  maxStagedTasks @4 :UInt32; # how many tasks it may hold beyond the one it computes (0: one at a time)
}

struct HelloReply {
  accepted @0 :Bool;
  reason @1 :Text;          # why a peer was refused; empty when accepted
  protocolVersion @2 :UInt32;
  pythonVersion @3 :Text;
  objectStorageAddress @4 :Text;
  heartbeatIntervalSeconds @5 :Float64;
  workerCount @6 :UInt32;   # connected workers, a hint for clients sizing map batches
  instanceId @7 :Data;      # this scheduler process; a new one after a restart at the same address
  resumeSeconds @8 :Float64; # a client's: how long its work waits for it when it is away (0: not at all)
  objectStorageServerKey @9 :Text;  # an agent's to its processors: the CURVE public key (z85) of the server at
                            # objectStorageAddress when it is not the servers' own (the host's cache); empty: theirs
  tunnelAddress @10 :Text;  # the scheduler's second way in (--tunnel-address, a tls://, ws:// or wss:// front), as
                            # bound; a peer that came through it reaches the object storage through it too; empty: none
}

struct Heartbeat {
  # Sent by clients, workers and managers. The scheduler answers each with a HeartbeatEcho.
  cpuPercent @0 :Float32;
  rssBytes @1 :UInt64;
  union {
    client @2 :Void;        # sent by clients
    worker @3 :WorkerStatus;  # sent by workers
    manager @4 :ManagerStatus;  # sent by managers
  }
  roundTripSeconds @5 :Float32;  # the sender's last heartbeat -> echo round trip; 0 before the first echo
  answersEpoch @6 :UInt32;       # a client's: the epoch of its answer count (ClientResumed starts a new one)
  answersReceived @7 :UInt64;    # a client's: answers (taskResult, taskCancelConfirm) received in that epoch
}

struct WorkerStatus {
  queued @0 :UInt32;        # tasks held by the worker, not yet started
  running @1 :UInt32;       # tasks being executed now
  blocked @2 :UInt32;       # nested parents waiting on their children
  freeMemoryBytes @3 :UInt64;
  processors @4 :List(ProcessorStatus);
  memoryBytes @5 :UInt64;       # the agent's and its processors' memory as the kernel charges it (PSS summed)
  memoryLimitBytes @6 :UInt64;  # the memory limit the worker runs under (its cgroup's, else the machine's)
  memoryLimitSource @7 :Text;   # "cgroup v1", "cgroup v2" or "machine"
}

struct ProcessorStatus {
  pid @0 :UInt32;
  cpuPercent @1 :Float32;
  rssBytes @2 :UInt64;
  state @3 :Text;           # "starting", "idle", "running", "blocked"
  memoryBytes @4 :UInt64;   # PSS: shared pages (the zygote's) divided among the processes sharing them
}

struct ManagerStatus {
  units @0 :UInt32;         # units the manager's backend currently reports
  pendingUnits @1 :UInt32;  # launched but not yet running
  bootSeconds @2 :Float64;  # measured mean from a unit's launch to its workers' registration; 0: none measured yet
  waits @3 :List(UnitWaits);  # its units that wait in their provider's queue, by the provider's reason
  held @4 :Text;            # why it launches fewer units than its target asks now; empty: it does not
}

struct UnitWaits {
  # A worker manager's units that have not started, for one reason their provider gives (a Slurm job's pending
  # reason, a pod's Unschedulable).
  reason @0 :Text;          # the provider's short code: "Resources", "Priority", "Unschedulable" ...
  units @1 :UInt32;
  message @2 :Text;         # the provider's own words, for one of them
}

struct HeartbeatEcho {
  objectStorageAddress @0 :Text;
  workerCount @1 :UInt32;
  resultsRead @2 :List(Data);  # on a processor's link: the results read there since the previous echo (the
                               # processor forgets them); empty to anyone else
  heartbeatIntervalSeconds @3 :Float64;  # to a worker: the period the scheduler gives it now (it grows with the
                                         # worker count, heartbeat_period.py); 0 to anyone else
}

struct Ping {
  # Probe; the receiver ignores it. Used by the scheduler to test whether a peer is still routable.
  nonce @0 :UInt64;
}

struct ProtocolError {
  # Answer to a message the receiver could not accept. Never answered itself.
  reason @0 :Text;
  kind @1 :ProtocolErrorKind;
}

enum ProtocolErrorKind {
  malformed @0;             # the frame is not a valid message
  unexpected @1;            # a valid message this peer may not send
  unknownPeer @2;           # the sender never said hello (or the scheduler restarted): say hello again
}

# ---------------------------------------------------------------- tasks

struct Argument {
  keyword @0 :Text;         # empty for a positional argument
  union {
    # The serialized value, the object id of the value in object storage, or (graphs) the id of the task whose
    # result it is.
    inline @1 :Data;        # the serialized value
    objectId @2 :Data;      # the serialized value lives in object storage
    taskResult @3 :Data;    # graphs only: the result of that task (client -> scheduler)
  }
  copyOnWrite @4 :Bool;     # an objectId argument the task gets writable, as a private copy-on-write view of the object
                            # (ObjectReference.copy_on_write); false: read-only where it is mapped
}

struct TaskBody {
  # Everything only the processor needs. The scheduler forwards it unread.
  functionId @0 :Data;      # object id of the serialized function in object storage
  args @2 :List(Argument);
  serializerId @1 :Data;    # object id of the client's serializer; empty = default (cloudpickle)
  profiling @3 :Bool;
  streamOutput @4 :Bool;
  clearEpoch @5 :UInt32;    # how many times the client had called clear() when it encoded the task: a processor
                            # uses an object it holds for the same client and epoch without asking storage again
  forwardLogging @6 :Bool;  # logging records of the task go to its client (Client.forward_logging)
  logForwarding :group {
    # Which logging records of a task go to its client, when forwardLogging is set.
    level @7 :Int32;        # those at this level or above
    loggerName @8 :Text;    # those of this logger and its children; empty: every logger
  }
}

struct Task {
  taskId @0 :Data;
  clientId @1 :Data;        # owner of the task and of its result
  functionName @2 :Text;    # for monitoring only
  priority @3 :Int32;       # higher runs first; nested children run above their parents
  capabilities @4 :List(Capability);
  body @5 :Data;            # an encoded TaskBody
  graphId @6 :Data;         # empty unless the task is a node of a graph
  dependencies @7 :List(Data);   # graph nodes: ids of the nodes whose results this one needs
  inputs @8 :List(TaskInput);    # scheduler -> worker: those results, for Argument.taskResult
  streamCredit @9 :UInt32;  # a streaming task (its function's values reach the client as StreamItems while it runs):
                            # how many values it may yield before its client grants more (StreamCredit); 0: not a stream
  actorId @10 :Data;        # an actor's call: the actor it is for (the id of the actor's start task); empty otherwise
  actor @11 :ActorSpec;     # an actor's start (its function is the class): the actor's id is this task's; absent otherwise
  largeInputs @12 :List(Data);  # client -> scheduler: the ids of the task's arguments stored as objects (at most
                                # 4, in argument order), so that it is placed on a host that holds them; empty: none
  resultId @13 :Data;       # scheduler -> worker: a task run again because its large result was lost before it was
                            # stored (its host went): the object id its result is stored under (its readers wait for
                            # it there); empty: a new one
}

struct ActorSpec {
  # What a client asks of an actor it starts (Client.actor). The start task stays at its worker while the actor lives.
  maxRestarts @0 :Int32;      # how many times it is started again after its worker or processor is lost (-1: always)
  maxConcurrency @1 :UInt32;  # its calls that run at once (0 or 1: one at a time, in the order they were made)
  name @2 :Text;              # a name clients of the same key find it by (ActorLookup); empty: none
  interface @3 :Data;         # what a handle needs to know of its class (the client's; the scheduler keeps it unread)
  fromTask @4 :Data;          # started from this task (by a client inside it): named in that task's client's key; empty: none
}

struct TaskInput {
  # The result of a graph node, handed to the nodes that depend on it.
  taskId @0 :Data;
  union {
    # The task's result: its serialized value, or its object id in object storage.
    inline @1 :Data;
    objectId @2 :Data;
  }
}

enum ResultStatus {
  success @0;               # payload holds the serialized return value
  failed @1;                # payload holds the pickled exception raised by the function
  workerDied @2;            # the task outlived its retry budget of dead workers
  processorDied @3;         # the process running the task exited (signal, os._exit, OOM)
  timedOut @4;              # the task ran longer than the worker's task timeout
  canceled @5;
  notSerializable @6;       # the result (or its exception) could not be serialized
  missingObject @7;         # an input object was not found in object storage
  error @8;                 # anything else; errorMessage says what
  noWorker @9;              # refused: the queue is full (max-number-of-tasks-waiting)
  hostLost @10;             # worker -> scheduler: the remote machine running it was lost (a reclaimed spot
                            # instance); the scheduler runs it again within its retry budget
  outOfMemory @11;          # the process running the task was killed by the kernel's OOM killer, or died at the
                            # worker's memory limit; errorMessage gives the task's peak and the limit
  actorRestarted @12;       # an actor's call that was at the actor when the actor was lost: the actor starts again
                            # elsewhere (errorMessage says why, and which restart), the call does not run again
  actorDied @13;            # an actor's call whose actor ended (stopped, its client gone, its constructor failed, its
                            # restarts spent) before the call did; errorMessage says why
  inputUnreachable @14;     # an input (an argument, the function) could not be fetched from object storage (silent,
                            # unreachable, the read broken off); errorMessage names the object and why. From a
                            # processor: the scheduler runs the task again within its retry budget; past it, the
                            # client gets this status
}

struct Profile {
  durationSeconds @0 :Float64;
  cpuSeconds @1 :Float64;
  peakMemoryBytes @2 :UInt64;
}

struct TaskResult {
  taskId @0 :Data;
  status @1 :ResultStatus;
  union {
    # The result: a serialized value or pickled exception inline, or the object id of one in object storage.
    none @3 :Void;
    inline @4 :Data;
    objectId @5 :Data;
  }
  errorMessage @2 :Text;    # human-readable reason for any status but success
  profile @6 :Profile;
  workerId @7 :Data;        # who produced it; empty when the scheduler made it
  ran @8 :RunStamps;        # when its processor ran it (wall clock); absent when it did not run
  storedBytes @9 :UInt64;   # an objectId result: its size in storage (jobs' storage quotas count it); 0: unknown
  streamed @10 :UInt64;     # a streaming task's end: how many values it yielded (each went as a StreamItem)
}

struct RunStamps {
  # A processor's own times for one task, carried to the scheduler on the result for the task's story.
  startedAt @0 :Float64;    # wall-clock seconds when the processor began the call
  finishedAt @1 :Float64;   # wall-clock seconds when the call returned or raised
  processorPid @2 :UInt32;
  receivedAt @3 :Float64;   # wall-clock seconds when the processor read the task from its link (0: unknown)
}

struct TaskCancel {
  taskIds @0 :List(Data);
  queuedOnly @1 :Bool;      # cancel only those not yet dispatched to a worker (an Executor's shutdown(cancel_futures=True)):
                            # the others are left to finish and get no answer to this cancel
}

enum CancelOutcome {
  canceled @0;
  notFound @1;              # already finished or never seen
}

struct TaskCancelConfirm {
  taskId @0 :Data;
  outcome @1 :CancelOutcome;
}

struct TaskLog {
  taskId @0 :Data;
  stream @1 :LogStream;
  text @2 :Text;
}

enum LogStream {
  stdout @0;
  stderr @1;
  records @2;               # logging records, one JSON object per line (scaler/worker/log_forwarding.py)
}

# ---------------------------------------------------------------- graphs

struct GraphTask {
  # A culled DAG. Nodes reference each other through Argument.taskResult.
  graphId @0 :Data;
  clientId @1 :Data;
  nodes @2 :List(Task);
  targets @3 :List(Data);   # task ids whose results the client wants
}

# ---------------------------------------------------------------- clients

struct ClientDisconnect {
  shutdownCluster @0 :Bool; # true: the client asks the whole cluster to stop
}

struct ShutdownReply {
  accepted @0 :Bool;
  reason @1 :Text;
}

struct TaskStoryRequest {
  # A client asks for one task's history as the scheduler knows it.
  taskId @0 :Data;
}

struct StoryEntry {
  # One step of a task's history: when, where (component and which one), what, and what caused it.
  wallTime @0 :Float64;     # wall-clock seconds
  component @1 :Text;       # scheduler, worker agent, processor, client
  where @2 :Text;           # which one: a scheduler instance, worker or processor id
  what @3 :Text;            # the transition: queued, dispatched, waiting, started, success ...
  cause @4 :Text;           # the stimulus: a submit, a dispatch attempt, a worker lost and why ...
}

struct TaskStoryReply {
  taskId @0 :Data;
  known @1 :Bool;           # false: the scheduler never saw the task or forgot it; `note` says which
  entries @2 :List(StoryEntry);
  note @3 :Text;            # what the entries leave out (a forgotten task, entries dropped past the bound)
}

# ---------------------------------------------------------------- workers

struct WorkerCapacity {
  # The worker changes how many tasks it accepts at once (nested parents blocked, prefetch tuned).
  capacity @0 :UInt32;
}

struct WorkerLeaving {
  # A worker that stops on purpose. The scheduler re-queues its tasks and answers with Shutdown. With drainSeconds,
  # it drains first: no new task, those it has not started given back, those it runs may end within drainSeconds
  # (then they are moved, at no retry cost); the scheduler answers with Shutdown once it holds none.
  reason @0 :Text;
  drainSeconds @1 :Float64;  # > 0: drain first, for at most this long (a lifetime that ends); 0: leave now
}

struct TaskReturn {
  # scheduler -> processor, on its link: give these staged, not yet started tasks back.
  # processor -> scheduler: these were given back (a subset of what was asked, or tasks it will not run beside an
  # actor it hosts).
  taskIds @0 :List(Data);
}

struct Shutdown {
  reason @0 :Text;
}

# ---------------------------------------------------------------- worker managers

struct TargetEntry {
  capabilities @0 :List(Capability);
  workers @1 :UInt32;
}

struct ManagerTarget {
  # Declarative: how many workers the scheduler wants from this manager, per capability set.
  entries @0 :List(TargetEntry);
  drain @1 :List(Text);     # ids of this manager's workers that are idle; stop these first
  connected @2 :List(Text); # ids of every worker of this manager connected now (a unit whose workers registered)
}

# ---------------------------------------------------------------- a processor: to its agent, and on its link

struct ProcessorReady {
  # processor -> agent, on their private socket: it started (the one message it sends its agent).
  pid @0 :UInt32;
}

struct ProcessorBlocked {
  # processor -> scheduler, on its link: the task waits on nested futures; its slot may serve other tasks.
  taskId @0 :Data;
}

struct ProcessorResumeRequest {
  # processor -> scheduler, on its link: the nested futures are done; the task takes the processor's computing turn
  # again once it is free (the processor gives it the turn itself).
  taskId @0 :Data;
}

struct ProcessorResume {
  # Within a processor only (its task line gives a resumed task the turn); on no link since version 4.
  taskId @0 :Data;
}

struct ResultSent {
  # Retired in version 4 (a result leaves on its processor's link only). Was: the processor sent this task's
  # TaskResult to the scheduler itself, on its own link, and told its agent.
  taskId @0 :Data;
  result @1 :Data;          # the TaskResult's frame, as the processor sent it
  seconds @2 :Float64;      # how long the task computed, as the processor measured it (the agent's run-time estimates)
}

struct ProcessorWriting {
  # processor -> scheduler, on its link: it still writes results it announced (readers follow the writes:
  # object_storage/followed_put.py), or is done with them. `true` comes before the TaskResult that ends its task;
  # `false` once every such write is stored or given up. Meanwhile the scheduler neither kills nor retires it.
  writing @0 :Bool;
}

struct ProcessorExited {
  # worker -> scheduler: one of its processors ended (docs/protocol.md section 3.7): the scheduler ends the tasks
  # held on its link, failing the one it computed with this description.
  processorId @0 :Data;     # its name within its worker (its link's identity is the worker's, "/", this)
  description @1 :Text;     # "killed by SIGSEGV", "exit code 7", ...
  outOfMemory @2 :Text;     # not empty: it was killed for memory (the peak and the limit), and the task fails so
  computingTask @3 :Data;   # the task it computed, from the mark it keeps for its agent (empty: none)
  computingTaskKnown @4 :Bool;  # the mark was read: only `computingTask` is blamed (false: no mark)
}

struct ProcessorKill {
  # scheduler -> worker: kill this processor now (its task was cancelled or timed out, a stopped task did not unwind,
  # or it is not needed any more); the worker answers with ProcessorExited as for any processor that ends.
  processorId @0 :Data;
  reason @1 :Text;
}

struct ProcessorsWanted {
  # scheduler -> worker: how many processors to keep started beyond its slots (processors that host an actor, or keep
  # a parent waiting on nested tasks with nested_parents "process", serve no slot). Surplus ones are named in
  # ProcessorKill.
  beyondSlots @0 :UInt32;
}

# ---------------------------------------------------------------- monitoring (PUB)

struct StatusSnapshot {
  # Monitor feed, topic "status": the scheduler's state at one instant (docs/protocol.md, monitor feed).
  time @0 :Float64;          # the scheduler's monotonic clock
  scheduler @1 :SchedulerStats;
  workers @2 :List(WorkerSummary);
  clients @3 :List(ClientSummary);
  managers @4 :List(ManagerSummary);
  pending @5 :List(PendingGroup);   # every capability set with queued or running tasks
  wallTime @6 :Float64;      # seconds since the epoch
  feedVersion @7 :UInt32;
  functions @8 :List(FunctionSummary);
  messageCounts @9 :List(MessageCount);
  jobs @10 :List(JobSummary);        # the named jobs the scheduler keeps (running, or ended within their retention)
  actors @11 :List(ActorSummary);    # the live actors
  storage @12 :Storage.StorageTraffic;  # where objects live and move: the object storage server's counts and its host
                                     # caches' (its info's, read every second while the status is read)
}

struct ActorSummary {
  actorId @0 :Data;
  className @1 :Text;                # its start task's function name
  name @2 :Text;                     # empty: anonymous
  clientId @3 :Data;                 # the client that started it
  workerId @4 :Data;                 # where it lives; empty while it is being placed
  state @5 :Text;                    # "placing", "running", "stopping", "stopped"
  restarts @6 :UInt32;               # times it was started again after a loss
  calls @7 :UInt32;                  # its calls not answered yet (waiting for it, or at its worker)
  callsDone @8 :UInt64;              # its calls answered
  ageSeconds @9 :Float64;            # since it was started
}

struct JobSummary {
  name @0 :Text;
  state @1 :Text;                    # "running", "done", "cancelled"
  done @2 :UInt32;                   # tasks answered
  total @3 :UInt32;
  submitterConnected @4 :Bool;
  failed @5 :UInt32;                 # of done: answers that are not a success
  submitter @6 :Text;                # the submitting client's name (or its id's tail)
  ownerKey @7 :Text;                 # the start of the owning CURVE key; empty without CURVE
  ageSeconds @8 :Float64;            # since the job was opened
}

struct TaskCounts {
  waiting @0 :UInt32;        # graph nodes waiting for their dependencies
  queued @1 :UInt32;
  running @2 :UInt32;        # dispatched (running or prefetched at a worker) or being cancelled
  succeeded @3 :UInt64;
  failed @4 :UInt64;
  canceled @5 :UInt64;
}

struct FunctionSummary {
  name @0 :Text;
  counts @1 :TaskCounts;
}

struct MessageCount {
  name @0 :Text;             # message type
  sent @1 :UInt64;           # by the scheduler
  received @2 :UInt64;
}

struct TaskTransitions {
  # Monitor feed, topic "tasks": task state changes since the previous publication, at most a bounded number.
  transitions @2 :List(TaskTransition);
  dropped @3 :UInt64;        # transitions left out since the previous publication (rate bound)
  wallTime @1 :Float64;
  feedVersion @0 :UInt32;
}

struct TaskTransition {
  taskId @0 :Data;
  state @1 :Text;            # waiting, queued, running, canceling, success, failed, canceled, workerDied
  workerId @2 :Data;         # dispatched: the worker; an end after a run: the worker that ran it; else empty
  functionName @3 :Text;
  wallTime @4 :Float64;
  runSeconds @5 :Float64;    # an end after a run: how long it held its worker; 0 otherwise
  peakMemoryBytes @6 :UInt64; # an end after a profiled run: the peak memory growth measured; 0 otherwise
  clientId @7 :Data;         # the client that submitted the task (empty from schedulers before it was added)
}

struct ScalingDecisions {
  # Monitor feed, topic "scaling": the latest changes of the managers' targets, with their reasons.
  decisions @2 :List(ScalingDecision);
  wallTime @1 :Float64;
  feedVersion @0 :UInt32;
}

struct ScalingDecision {
  managerId @0 :Text;
  fromWorkers @1 :UInt32;
  toWorkers @2 :UInt32;
  reason @3 :Text;
  wallTime @4 :Float64;
}

struct SchedulerStats {
  address @0 :Text;
  cpuPercent @1 :Float32;
  rssBytes @2 :UInt64;
  queued @3 :UInt32;
  running @4 :UInt32;
  succeeded @5 :UInt64;
  failed @6 :UInt64;
  canceled @7 :UInt64;
  workerDied @8 :UInt64;
  objectCount @9 :UInt64;
  objectBytes @10 :UInt64;
  messagesReceived @11 :UInt64;
  messagesSent @12 :UInt64;
  graphs @13 :UInt32;
  notFound @14 :UInt64;  # cancels of tasks the scheduler did not know (already ended, or never seen)
  nearData @15 :UInt64;  # tasks naming large inputs placed on a host that holds one of them (placement follows data)
  awayFromData @16 :UInt64;  # such tasks placed elsewhere at once, every holding host being busy
}

struct WorkerSummary {
  workerId @0 :Data;
  managerId @1 :Text;
  capabilities @2 :List(Capability);
  capacity @3 :UInt32;
  assigned @4 :UInt32;
  status @5 :WorkerStatus;
  cpuPercent @6 :Float32;
  rssBytes @7 :UInt64;
  lastSeenSecondsAgo @8 :Float64;
  hostname @9 :Text;
  pid @10 :UInt32;
  lagSeconds @11 :Float32;            # its heartbeat round trip
  workerType @12 :Text;
  connectedSecondsAgo @13 :Float64;
}

struct ClientSummary {
  clientId @0 :Data;
  tasks @1 :UInt32;          # live tasks
  name @2 :Text;
  hostname @3 :Text;
  counts @4 :TaskCounts;
  awaySeconds @5 :Float64;   # how long it has been away (silent or its connection lost); 0: present
  resumeSeconds @6 :Float64; # how long its work waits for it when it is away; 0: not at all
}

struct ManagerSummary {
  managerId @0 :Text;
  managerType @1 :Text;
  capabilities @2 :List(Capability);
  maxWorkers @3 :WorkerLimit;
  connectedWorkers @4 :UInt32;
  targetWorkers @5 :UInt32;
  units @6 :UInt32;
  pendingUnits @7 :UInt32;
  lastTarget @8 :ManagerTarget;       # meaningful when hasTarget
  hasTarget @9 :Bool;
  secondsSinceHeartbeat @10 :Float64;
  workerCostPerHour @11 :Float64;     # declared by the manager (0: free or unknown)
  bootSeconds @12 :Float64;           # declared, else measured; 0: unknown
  minWorkers @13 :UInt32;             # warm capacity: kept even when idle
  bufferWorkers @14 :UInt32;          # warm capacity: idle headroom beyond what the queue needs
  waits @15 :List(UnitWaits);         # its units that wait in their provider's queue (its heartbeat's)
  held @16 :Text;                     # why it launches fewer units than its target asks now; empty: it does not
}

struct PendingGroup {
  # Tasks that share a capability set (the dispatcher's queue key): queued ones, why they wait, and running ones.
  capabilities @0 :List(Capability);
  count @1 :UInt32;          # queued
  reason @2 :Text;           # why the queued ones wait; empty when none is queued
  running @3 :UInt32;
  oldestQueuedSeconds @4 :Float64;
}

# ---------------------------------------------------------------- envelope

struct Message {
  union {
    hello @0 :Hello;
    helloReply @1 :HelloReply;
    heartbeat @2 :Heartbeat;
    heartbeatEcho @3 :HeartbeatEcho;
    ping @4 :Ping;
    protocolError @5 :ProtocolError;
    task @6 :Task;
    taskResult @7 :TaskResult;
    taskCancel @8 :TaskCancel;
    taskCancelConfirm @9 :TaskCancelConfirm;
    taskLog @10 :TaskLog;
    graphTask @11 :GraphTask;
    clientDisconnect @12 :ClientDisconnect;
    shutdownReply @13 :ShutdownReply;
    workerCapacity @14 :WorkerCapacity;
    workerLeaving @15 :WorkerLeaving;
    taskReturn @16 :TaskReturn;
    shutdown @17 :Shutdown;
    managerTarget @18 :ManagerTarget;
    processorReady @19 :ProcessorReady;
    processorBlocked @20 :ProcessorBlocked;
    processorResumeRequest @21 :ProcessorResumeRequest;
    processorResume @22 :ProcessorResume;
    statusSnapshot @23 :StatusSnapshot;
    taskTransitions @24 :TaskTransitions;
    scalingDecisions @25 :ScalingDecisions;
    unitsReclaimed @26 :UnitsReclaimed;
    taskStoryRequest @27 :TaskStoryRequest;
    taskStoryReply @28 :TaskStoryReply;
    jobOpen @29 :JobOpen;
    jobAttach @30 :JobAttach;
    jobReply @31 :JobReply;
    clientResume @32 :ClientResume;
    clientResumed @33 :ClientResumed;
    streamItem @34 :StreamItem;
    streamCredit @35 :StreamCredit;
    actorReady @36 :ActorReady;
    actorStop @37 :ActorStop;
    actorLookup @38 :ActorLookup;
    actorReply @39 :ActorReply;
    resultSent @40 :ResultSent;
    processorExited @41 :ProcessorExited;
    processorWriting @42 :ProcessorWriting;
    processorKill @43 :ProcessorKill;
    processorsWanted @44 :ProcessorsWanted;
  }
}

struct UnitsReclaimed {
  # A worker manager's provider takes units back (a spot interruption): their workers are drained at once.
  unitIds @0 :List(Text);
  noticeSeconds @1 :Float64;  # the time left before the units go
}

# ---------------------------------------------------------------- jobs (docs/guide/sharing.md, "Jobs")

struct JobOpen {
  # A named job: the tasks it will hold, sent before them; they are not cancelled when the client leaves.
  name @0 :Text;
  taskIds @1 :List(Data);  # in submission order
}

struct JobAttach {
  name @0 :Text;
  follow @1 :Bool;  # false: only look the job up; true: its kept results and those to come are sent here
}

struct JobReply {
  # The answer to JobOpen or JobAttach; after an accepted attach, the job's kept results follow as TaskResults.
  name @0 :Text;
  accepted @1 :Bool;
  reason @2 :Text;          # why it was refused; empty when accepted
  taskIds @3 :List(Data);   # the job's tasks in submission order (attach)
  state @4 :Text;           # "running", "done", "cancelled"
  ownerId @5 :Data;         # the submitter's client id: its results are stored under it in object storage
}

# ---------------------------------------------------------------- a client coming back (docs/protocol.md 5.15)

struct ClientResume {
  # A client whose connection closed (or changed) asks for what may have been lost in it.
  answersEpoch @0 :UInt32;     # the epoch its count is of
  answersReceived @1 :UInt64;  # answers received in that epoch: those after it are sent again
  unfinished @2 :List(Data);   # ids of its tasks (graph targets included) it has no answer for
}

struct ClientResumed {
  # The answer to ClientResume: a new answer epoch starts with it; the answers sent again follow it.
  answersEpoch @0 :UInt32;     # the new epoch (the client counts answers from here)
  unknown @1 :List(Data);      # of `unfinished`, the ids the scheduler never received: to be sent again
  cancelled @2 :List(Data);    # of `unfinished`, the ids it cancelled when it dropped this client (away too long)
}

# ---------------------------------------------------------------- streaming tasks and actors (docs/guide/actors_and_streams.md)

struct StreamItem {
  # processor -> scheduler -> client: one value a streaming task yielded (Task.streamCredit), in the order it was yielded.
  # The task's TaskResult ends the stream and says how many values there were (TaskResult.streamed).
  taskId @0 :Data;
  index @1 :UInt64;         # 0 for the first value
  union {
    inline @2 :Data;        # the serialized value
    objectId @3 :Data;      # the serialized value lives in object storage (over the inline limit), owned by the client
  }
}

struct StreamCredit {
  # client -> scheduler -> processor: the streaming task may yield the values of index below `upTo`.
  # Cumulative: a later credit replaces an earlier one; a smaller one changes nothing.
  taskId @0 :Data;
  upTo @1 :UInt64;
}

struct ActorReady {
  # processor -> scheduler, on its link: the actor's constructor returned; its instance lives in that processor.
  actorId @0 :Data;
  processor @1 :Data;       # retired in version 4 (ActorReady comes on the link the calls are to go on); sent empty
}

struct ActorStop {
  # client -> scheduler: stop the actor once the calls made before this one have ended (later calls are refused).
  actorId @0 :Data;
}

struct ActorLookup {
  # client -> scheduler: the actor of this name, among those started by clients of this client's key.
  name @0 :Text;
  fromTask @1 :Data;          # made from this task (by a client inside it): looked up in that task's client's key
}

struct ActorReply {
  # scheduler -> client: the answer to an ActorLookup.
  name @0 :Text;
  found @1 :Bool;
  actorId @2 :Data;
  className @3 :Text;       # its start task's function name
  interface @4 :Data;       # its ActorSpec.interface
  reason @5 :Text;          # why it was not found; empty when found
}
