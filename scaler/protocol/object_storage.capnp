@0xc7a2e4f6b8d01a35;

# The object storage protocol. A request is one ZeroMQ multipart message whose first frame is an
# encoded StorageRequest; a put carries the object's bytes in the frames that follow (chunks of at
# most 256 MiB, concatenated in order). A reply is one multipart message whose first frame is an
# encoded StorageReply; a successful get carries the object's bytes in the frames that follow.
# Every connection starts with a hello; a request from a peer that has not said hello is answered
# with status helloRequired and not carried out.

struct StorageRequest {
  requestId @0 :UInt64;     # echoed in the reply
  union {
    hello @1 :StorageHello;
    put @2 :PutRequest;
    get @3 :Data;           # object id
    delete @4 :List(Data);  # object ids; missing ones are ignored
    exists @5 :Data;        # object id
    info @6 :Void;
    deleteOwner @7 :Data;   # delete every object put with this owner id
  }
}

struct StorageHello {
  protocolVersion @0 :UInt32;
  pythonVersion @1 :Text;
  role @2 :Text;            # "client", "worker", "processor", "scheduler", ... (what it may do depends on it)
  ownerId @3 :Data;         # a client's id: the owner of what it stores; it may read and delete only that
}

struct PutRequest {
  objectId @0 :Data;
  ownerId @1 :Data;         # the client that owns the object; empty for none
  totalBytes @2 :UInt64;    # must equal the sum of the payload frames
  name @3 :Text;            # optional, for monitoring
}

enum StorageStatus {
  ok @0;
  notFound @1;
  helloRequired @2;
  refused @3;               # incompatible hello
  badRequest @4;            # malformed request; reason says why
  full @5;                  # put: the server can hold nothing more (memory budget reached, spill disk full
                            # or no spill directory); reason names the limit; nothing was stored
}

struct StorageReply {
  requestId @0 :UInt64;
  status @1 :StorageStatus;
  reason @2 :Text;
  union {
    none @3 :Void;
    object @4 :UInt64;      # get: total bytes of the payload frames that follow
    exists @5 :Bool;
    info @6 :StorageInfo;
    deleted @7 :UInt64;     # delete / deleteOwner: how many objects were removed
  }
}

struct StorageInfo {
  objectCount @0 :UInt64;
  totalBytes @1 :UInt64;
  ownerCount @2 :UInt64;
}
