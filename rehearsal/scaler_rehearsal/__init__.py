"""The rehearsals of scaler, a distribution of their own (`scaler-rehearsal`, installed by the `fake-cloud` and
`fake-kubernetes` extras): the fake cloud (`fake_cloud`), the fake Kubernetes (`fake_kubernetes`), the simulation
doubles (`testing`) and their commands (`entry_points`). The product never imports this package.

What the two rehearsals share lives here: how an image reference is read and the mirror of the machine's ordinary
commands that a unit's PATH holds (`images`), a unit's process group (`process_groups`), and how their commands name
a missing extra and wait for Ctrl-C (`command`)."""
