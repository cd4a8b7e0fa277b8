"""What the job runs on: the static probe of this machine (`probe`), its live load (`monitor`,
`contention`), the device samplers (`samplers/`), described machines from shipped profiles
(`target_profiles`), and the process's allocator setting (`allocator`).

Nothing here knows about backends, predictions or runs: the packages above ask it.
"""
