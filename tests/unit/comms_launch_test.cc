// Launch detection from the launchers' environments (mpirun, an srun step, an sbatch script or salloc shell,
// torchrun), and the launch command hints name. Part of comms_tests, which also runs under mpirun: each test runs on
// an environment of its own and puts the process's back afterwards.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "reprise/comms/communicator.h"

extern char** environ;

using namespace reprise::comms;

namespace {

// Replaces the whole environment with `vars` for the test's lifetime.
class Environment {
 public:
  explicit Environment(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (char** e = environ; e && *e; ++e) saved_.emplace_back(*e);
    clearenv();
    for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  }
  ~Environment() {
    clearenv();
    for (const std::string& s : saved_) {
      const size_t eq = s.find('=');
      setenv(s.substr(0, eq).c_str(), s.substr(eq + 1).c_str(), 1);
    }
  }

 private:
  std::vector<std::string> saved_;
};

// What Slurm 22.05 sets in the tasks of `srun -n 3 --mpi=pmix` (one node), as printed by `env` in each task.
const std::vector<std::pair<std::string, std::string>> kSrunStep = {
    {"SLURM_JOB_ID", "4"},         {"SLURM_STEP_ID", "0"},
    {"SLURM_STEPID", "0"},         {"SLURM_NTASKS", "3"},
    {"SLURM_STEP_NUM_TASKS", "3"}, {"SLURM_STEP_NUM_NODES", "1"},
    {"SLURM_TASKS_PER_NODE", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "3"},
    {"SLURM_NODEID", "0"},         {"SLURM_PROCID", "2"},
    {"SLURM_LOCALID", "2"},        {"PMIX_RANK", "2"}};

}  // namespace

TEST(Launch, NoLauncherIsAWorldOfOne) {
  Environment env({});
  const Launch l = detect_launch();
  EXPECT_EQ(l.launcher, "single");
  EXPECT_EQ(l.size, 1);
  EXPECT_FALSE(l.mpi);
  EXPECT_FALSE(l.slurm_job);
  EXPECT_EQ(launch_command(l, 2), "mpirun -np 2");
}

TEST(Launch, MpirunRanks) {
  Environment env({{"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_RANK", "3"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const Launch l = detect_launch();
  EXPECT_EQ(l.launcher, "mpirun");
  EXPECT_TRUE(l.mpi);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
  EXPECT_EQ(launch_command(l, 4), "mpirun -np 4");
}

TEST(Launch, SrunStepTask) {
  Environment env(kSrunStep);
  const Launch l = detect_launch();
  EXPECT_EQ(l.launcher, "srun");
  EXPECT_TRUE(l.mpi);
  EXPECT_TRUE(l.slurm_job);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.size, 3);
  EXPECT_EQ(l.local_rank, 2);
  EXPECT_EQ(l.local_size, 3);
  EXPECT_EQ(launch_command(l, 2), "srun -n 2");
}

// The step's counts, not the job's: `srun -n 2` inside `salloc -n 4`.
TEST(Launch, SrunStepSmallerThanItsJob) {
  auto vars = kSrunStep;
  vars.push_back({"SLURM_JOB_NUM_NODES", "1"});
  for (auto& [name, value] : vars) {
    if (name == "SLURM_STEP_NUM_TASKS" || name == "SLURM_STEP_TASKS_PER_NODE") value = "2";
    if (name == "SLURM_PROCID" || name == "SLURM_LOCALID" || name == "PMIX_RANK") value = "1";
    if (name == "SLURM_NTASKS" || name == "SLURM_TASKS_PER_NODE") value = "4";
  }
  Environment env(vars);
  const Launch l = detect_launch();
  EXPECT_EQ(l.launcher, "srun");
  EXPECT_EQ(l.size, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.local_size, 2);
}

// A batch script (sbatch -n 2) and an salloc shell are one process that Slurm gives the job's variables, rank 0 of
// the job's task count among them: not a launch of several ranks, but srun is how to start them there.
TEST(Launch, SbatchScriptAndSallocShellAreOneProcess) {
  for (bool batch : {true, false}) {
    SCOPED_TRACE(batch ? "sbatch" : "salloc");
    std::vector<std::pair<std::string, std::string>> vars = {
        {"SLURM_JOB_ID", "6"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "2"}};
    if (batch) vars.insert(vars.end(), {{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}});
    Environment env(vars);
    const Launch l = detect_launch();
    EXPECT_EQ(l.launcher, "single");
    EXPECT_EQ(l.size, 1);
    EXPECT_FALSE(l.mpi);
    EXPECT_TRUE(l.slurm_job);
    EXPECT_EQ(launch_command(l, 2), "srun -n 2");
    EXPECT_EQ(launch_command(l, "N"), "srun -n N");
  }
}

// mpirun inside an allocation starts its daemons as a step: the ranks see that step's variables beside Open MPI's.
TEST(Launch, MpirunInsideAnAllocationIsMpirun) {
  auto vars = kSrunStep;
  vars.insert(vars.end(), {{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "5"}});
  Environment env(vars);
  const Launch l = detect_launch();
  EXPECT_EQ(l.launcher, "mpirun");
  EXPECT_EQ(l.size, 8);
  EXPECT_EQ(l.rank, 5);
}

// SLURM_STEP_TASKS_PER_NODE is compressed: "2(x3),1" is 2 tasks on each of nodes 0-2 and 1 on node 3.
TEST(Launch, LocalSizeFromTheStepsTasksPerNode) {
  const std::vector<std::pair<std::string, int>> cases = {{"0", 2}, {"2", 2}, {"3", 1}, {"4", 1}};
  for (const auto& [node, local] : cases) {
    SCOPED_TRACE("node " + node);
    Environment env({{"SLURM_JOB_ID", "9"},
                     {"SLURM_STEP_NUM_TASKS", "7"},
                     {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                     {"SLURM_NODEID", node},
                     {"SLURM_PROCID", "6"},
                     {"SLURM_LOCALID", "0"}});
    EXPECT_EQ(detect_launch().local_size, local);  // node 4 does not exist: 1, never 0
  }
  for (const char* bad : {"", "x", "2(3)", "2(x)", "2(x3", "2(", "2;1", "2,", "-1", "99999999999"}) {
    SCOPED_TRACE(bad);
    Environment env({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_TASKS_PER_NODE", bad}, {"SLURM_PROCID", "1"}});
    const Launch l = detect_launch();
    EXPECT_EQ(l.launcher, "srun");
    EXPECT_EQ(l.local_size, 1);
  }
}

TEST(Launch, TorchrunRanks) {
  Environment env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}});
  const Launch l = detect_launch();
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_FALSE(l.mpi);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.size, 2);
  EXPECT_EQ(launch_command(l, 2), "torchrun --nproc-per-node 2 --no-python");
}
