// MultiWorkerMirrored: one replica per process of an MPI job, the processes
// meeting through MPI (Debian's OpenMPI), started by mpirun or by Kubernetes'
// MPIJob (whose launcher runs mpirun):
//
//   # runtime.strategy: {type: multi_worker_mirrored, collective_timeout: 600}
//   mpirun -np 2 nimbus train config.yaml
//
// The cluster layout (rank, size) comes from MPI. MPI is initialized when the
// strategy is made and finalized at exit; after a failed step (a collective timed
// out, any error in a replica) the process ends the whole job with MPI_Abort at
// exit instead, so that no worker is left waiting on it.
#pragma once

#include <memory>

#include "nimbus/distribute/strategy.h"

namespace nimbus::distribute {

// Throws Unavailable when this build has no MPI (install libopenmpi-dev and rebuild). With
// `replicas_on` kCUDA each process's replica runs on the one GPU it sees (CUDA_VISIBLE_DEVICES set per
// rank), else on the GPU of its local rank (local_gpu_index), and all-reduces its gradients through NCCL (rank 0's
// unique id broadcast over MPI); MPI stays the host collectives (the broadcast of the id, barriers).
std::shared_ptr<Strategy> MultiWorkerMirrored(const StrategyOptions& options = {},
                                              DeviceType replicas_on = DeviceType::kCPU);
// The GPU a process of a multi-GPU node takes: its rank on the node, from OMPI_COMM_WORLD_LOCAL_RANK
// (mpirun), else LOCAL_RANK (torchrun, Kubernetes launchers), else 0.
int local_gpu_index();
bool built_with_mpi();
// This process's rank in the job mpirun started (OMPI_COMM_WORLD_RANK, PMI_RANK), 0 outside one;
// read from the environment, so it is known before MPI starts (for the metrics port: port + rank).
int launcher_rank();
// The number of processes of that job (OMPI_COMM_WORLD_SIZE, PMI_SIZE), 0 outside one: the replicas
// multi_worker_mirrored makes, known before MPI starts (a dry run's, which starts none).
int launcher_world_size();

}  // namespace nimbus::distribute
