@0xc7a2e4f6b8d01a35;

# The object storage protocol. A request is one ZeroMQ multipart message whose first frame is an
# encoded StorageRequest; a put carries the object's bytes in the frames that follow (chunks of at
# most 256 MiB, concatenated in order; over CURVE, pieces of at most 1 MiB: see PutRequest.frameBytes).
# A reply is one multipart message whose first frame is an encoded StorageReply; a successful get carries
# the object's bytes in the frames that follow (a CURVE-secured server sends frames over 1 MiB in pieces
# of 1 MiB, which a reader joins: libzmq encrypts a message whole before sending it).
# Every connection starts with a hello; a request from a peer that has not said hello is answered
# with status helloRequired and not carried out.
#
# Objects the server holds in memory from SEGMENT_FROM_BYTES (64 KiB) on are files of its segment directory
# (shared memory on its host; docs/architecture.md, "Objects in shared memory"). The hello's reply names that
# directory; a peer that sees the same directory (same boot id, device and inode) is on the server's host: it may
# map objects from there (getMapped, or a segment file by its name) and store objects by writing a file there and
# asking the server to adopt it. Any other peer moves bytes over the socket, as get and put do.

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
    adopt @8 :AdoptRequest; # store the object a peer on the server's host wrote into the segment directory
    getMapped @9 :Data;     # object id: a get that may be answered `mapped` (the peer maps the segment file)
    adoptMany @10 :AdoptMany;  # several adopts in one request (a burst of a client's arguments): each
                            # carried out as `adopt` is; answered once, when every one is settled, with `outcomes`
    getInParts @11 :Data;   # object id: a get whose bytes may come as messages of their own (StorageReply.parts),
                            # so that a reader copies each piece while the next ones are on their way
    writeBegin @12 :WriteBegin;  # a peer on the server's host starts writing an object's segment file: readers may
                            # follow it (getInParts gets each piece once written; get, getMapped wait for its adopt)
    writeProgress @13 :WriteProgress;  # how far a writeBegin's file is written, or that its writer gave up
    source @14 :SourceRequest;  # a host cache (its hello names its address) asks where to fetch an object from:
                            # answered `source` (another host's cache, or this server); a client asks where a
                            # result of its own is held (answered with the holder's key too; it is recorded nowhere)
    hostReport @15 :HostReport;  # a host cache tells its storage server what it holds and moves (every second while
                            # that changes, every 10 s while it does not): answered `none`; the server's info carries it
    fates @16 :List(Data);  # the scheduler asks what becomes of these objects (large results whose tasks it keeps until
                            # they are stored): answered `fates`
    clientKey @17 :Text;    # a host cache asks whether a peer's CURVE public key (z85) may read from it as a client:
                            # answered `owners`, the client ids this server bound to that key (the sessions of
                            # its clients: a client at the cache may claim only those); refused when this server
                            # does not give that key the client role
  }
}

struct HostTraffic {
  # One host's row: its cache's counts since it started.
  host @0 :Text;            # the host's name
  address @1 :Text;         # where other hosts' caches reach its cache; empty: nowhere (it fetches from the storage)
  bytesFromStorage @2 :UInt64;  # fetched from the storage server
  bytesFromHosts @3 :UInt64;    # fetched from other hosts' caches
  bytesToHosts @4 :UInt64;      # sent to other hosts' caches
  bytesUploaded @5 :UInt64;     # results of its processors stored at the storage server
  heldObjects @6 :UInt64;       # objects its cache holds
  heldBytes @7 :UInt64;
  transfers @8 :UInt32;         # its fetches under way
}

struct Transfer {
  # An object on its way to a host.
  objectId @0 :Data;
  to @1 :Text;              # the host fetching it
  source @2 :Text;          # the host it comes from; empty: the storage server
  doneBytes @3 :UInt64;     # received so far (a fetch says so every 4 MiB)
  totalBytes @4 :UInt64;
  seconds @5 :Float64;      # since it began
}

struct HostReport {
  # What a host cache holds and has moved since it started (docs/monitoring.md, "Where bytes live and move").
  counts @0 :HostTraffic;   # its row; `address` and `transfers` are the server's to fill (empty here)
  copies @1 :List(Data);    # the objects of 1 MiB or more it holds whole: the largest, at most 64
  transfers @2 :List(Transfer);  # its fetches under way (`to` empty: the reporter; `source`: the cache it fetches
                            # from, by address; empty: the storage server)
}

struct ObjectCopies {
  # One large object: its copies out of the storage server and on the hosts.
  objectId @0 :Data;
  name @1 :Text;            # as it was stored ("argument of ndarray", a send_object name)
  totalBytes @2 :UInt64;
  copiesSent @3 :UInt32;    # reads of it the storage server answered over a socket, each a whole copy (a broadcast
                            # that goes host to host: about one)
  hosts @4 :UInt32;         # host caches that hold it whole
  fetching @5 :UInt32;      # host caches fetching it now
}

struct StorageTraffic {
  # Where a storage server's objects live and move: its own counts, and what its host caches report, bounded however
  # many hosts there are (docs/monitoring.md, "Where bytes live and move").
  bytesSent @0 :UInt64;     # payload bytes it sent to readers, over its sockets
  bytesSentToCaches @1 :UInt64;  # of those, to host caches
  bytesReceived @2 :UInt64; # payload bytes of the puts it received
  hostCount @3 :UInt32;     # host caches that reported within the last 30 to 60 s
  hosts @4 :List(HostTraffic);  # the 32 with transfers under way or, after them, that moved the most bytes
  otherHosts @5 :HostTraffic;   # the other hosts' rows summed (host and address empty)
  objects @6 :List(ObjectCopies);  # the 10 largest objects of 1 MiB or more that were sent, are held or move
  transfers @7 :List(Transfer);  # the 16 transfers under way with the most bytes to go
  transferCount @8 :UInt32; # every transfer under way
  transferBytesLeft @9 :UInt64;  # the bytes every transfer under way has to go
}

struct SourceRequest {
  objectId @0 :Data;
  failed @1 :Text;          # the address of a source the asker could not fetch it from (said once in its log), which
                            # is not named again; empty: none
}

struct ObjectSource {
  address @0 :Text;         # a host cache that holds the object or is fetching it; empty: fetch it from this server
  pieceDigests @1 :List(Data);  # BLAKE2b (16 bytes) of each piece of the object as getInParts cuts it (its frames,
                            # those over 1 MiB in pieces of 1 MiB): the asker checks what the source sends
  serverKey @2 :Text;       # to a client that asks: the CURVE public key (z85) the host cache serves with; empty
                            # without CURVE
}

struct WriteBegin {
  objectId @0 :Data;
  ownerId @1 :Data;         # the client that owns the object; empty for none
  fileName @2 :Text;        # the .put file in the segment directory: its header written, its size set
  totalBytes @3 :UInt64;    # the payload bytes it will hold
  name @4 :Text;            # optional, for monitoring
  frameBytes @5 :List(UInt64);  # the object's frames' lengths, as the file's header names them
}

struct WriteProgress {
  objectId @0 :Data;
  writtenBytes @1 :UInt64;  # the payload bytes written so far: the first ones of the frames, in order
  failed @2 :Text;          # non-empty: the writer gave up (why); the object will not be stored
}

struct StorageHello {
  protocolVersion @0 :UInt32;
  pythonVersion @1 :Text;
  role @2 :Text;            # "client", "worker", "processor", "scheduler", ... (what it may do depends on it)
  ownerId @3 :Data;         # a client's id: the owner of what it stores; it may read and delete only that
  cacheAddress @4 :Text;    # a host cache's: where the caches of other hosts reach it (role "cache"); empty: none
}

struct AdoptRequest {
  objectId @0 :Data;
  ownerId @1 :Data;         # the client that owns the object; empty for none
  fileName @2 :Text;        # the file written in the segment directory (a segment file, named <anything>.put)
  totalBytes @3 :UInt64;    # the payload bytes the file holds: must equal its header's
  name @4 :Text;            # optional, for monitoring
}

struct AdoptMany {
  adopts @0 :List(AdoptRequest);
}

struct AdoptOutcomes {
  outcomes @0 :List(AdoptOutcome);
}

struct AdoptOutcome {
  status @0 :StorageStatus; # what `adopt` of this one alone would have answered
  reason @1 :Text;          # why, when it is not ok
}

struct PutRequest {
  objectId @0 :Data;
  ownerId @1 :Data;         # the client that owns the object; empty for none
  totalBytes @2 :UInt64;    # must equal the sum of the payload frames
  name @3 :Text;            # optional, for monitoring
  frameBytes @4 :List(UInt64);  # the object's frames' lengths when the payload frames are pieces of them (a CURVE
                            # connection sends frames over 1 MiB in pieces): the server joins them again; empty:
                            # the payload frames are the object's frames
  turn @5 :Bool;            # a host cache asks for its turn to upload this object (`totalBytes` of it), without payload:
                            # answered ok once the server admits the upload (then the put itself follows on the same
                            # connection); a server that does not know the field answers badRequest (no payload)
  hold @6 :Bool;            # a host cache holds this object (`totalBytes` of it) and will upload it, without payload:
                            # answered ok once the server recorded it (reads of it wait for the upload, other hosts
                            # fetch it from that cache); refused `full` beyond the server's bound; a server that does
                            # not know the field answers badRequest (no payload)
  pieceDigests @7 :List(Data);  # a hold's: BLAKE2b (16 bytes) of each piece of the object as getInParts cuts it,
                            # named with the holder to the caches that fetch it from there
  wanted @8 :Bool;          # a host cache whose upload of an object it holds waits (it yields to other hosts' reads)
                            # asks what of it is wanted, without payload: answered ok, `exists` true when a reader
                            # waits for it at the server (it goes now), false otherwise; notFound when the server
                            # neither holds it as held nor stores it (deleted: it is not uploaded); a server that does
                            # not know the field answers badRequest (no payload)
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
    segments @8 :SegmentDirectory;  # hello: where the server keeps objects in memory (path empty: nowhere)
    mapped @9 :UInt64;      # getMapped: the object is the segment file named after its id; total payload bytes
    outcomes @11 :AdoptOutcomes;  # adoptMany: each adopt's outcome, in the order asked
    source @13 :ObjectSource;  # source: where to fetch the object from
    fates @14 :List(Int64); # fates: per object asked, in order: -1 nothing to wait for (stored, or neither held nor
                            # lost: deleted, never held); n >= 0 not stored yet, held by a host cache (n = 0) or lost
                            # n times (its holder went before its upload was stored: its task is to run again)
    owners @15 :List(Data); # clientKey: the client ids bound to the key asked about (empty: none yet)
  }
  frameBytes @10 :List(UInt64);  # get over CURVE: the object's frames' lengths when the payload frames are pieces of
                            # them (frames over 1 MiB go in pieces): the reader joins them again; empty: the
                            # payload frames are the object's frames
  parts @12 :UInt32;        # getInParts: this reply carries no payload; that many messages follow, in order, each a
                            # StorageReply with the same requestId, status ok and no value, and one payload frame: a
                            # piece of at most 1 MiB of the object's frames (named by frameBytes), or a frame of its
                            # own up to that size. 0: the payload follows this header, as a get's does
}

struct SegmentDirectory {
  path @0 :Text;            # absolute path of the directory on the server's host
  bootId @1 :Text;          # the host's /proc/sys/kernel/random/boot_id
  device @2 :UInt64;        # st_dev of the directory
  inode @3 :UInt64;         # st_ino of the directory
  sharedMemory @4 :Bool;    # a tmpfs (false: the fallback, a directory whose files the page cache backs)
  hostCache @5 :Bool;       # the server is a host's cache of another storage server: it takes no writeBegin (a peer
                            # puts or adopts, and is answered once the other server holds the object too)
}

struct StorageInfo {
  objectCount @0 :UInt64;
  totalBytes @1 :UInt64;
  ownerCount @2 :UInt64;
  traffic @3 :StorageTraffic;  # where its objects live and move (version 6 and on; zeros from a host cache)
}
