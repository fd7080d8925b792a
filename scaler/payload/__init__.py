"""How a call and its result become bytes, and back: one home for both sides of a task.

- `serializer`: the `Serializer` interface, the default (cloudpickle) one, and objects as frames.
- `references`: `ObjectReference` (an object sent once) and `NodeResult` (a graph node's result in an argument).
- `storage`: what travels inline (`INLINE_LIMIT_BYTES`) and what payload code needs from object storage.
- `task_encoder`: a call as a Task (client side): functions stored once, arguments inline or in storage.
- `task_decoder`: a Task as a call (processor side): serializer, function and arguments, with their caches.
- `result_writer`: a call's value or exception as a TaskResult (processor side).
- `result_reader`: a TaskResult as the task's value or exception (client side).
- `remote_bundle`: a task packed with its objects for a remote system, and its outcome (offloading).
- `processor_context`: what code running inside a processor can learn about its surroundings.

The client and the worker both use this package, and it imports neither: it sits below them in the layers
(docs/architecture.md). Importing the package imports none of its modules.
"""
