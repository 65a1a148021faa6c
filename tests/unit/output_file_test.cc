// Outputs are written, not replaced: files whole or not at all, devices and FIFOs in place, links followed, every
// failure a UserError with the system's reason, no temporary left by an error or a signal (reprise/trace/output.h).
#include "output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "reprise/common/files.h"
#include "reprise/trace/builder.h"
#include "reprise/trace/output.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"
#include "test_util.h"

namespace reprise {
namespace {

namespace fs = std::filesystem;
using test::test_dir;
using test::user_error;
using test::write_file;

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Names in `dir` that look like a temporary ("NAME.tmp-PID").
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(e.path().string());
  return found;
}

bool is_char_device(const std::string& path) {
  struct stat st = {};
  return lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

bool is_link(const std::string& path) { return fs::is_symlink(fs::symlink_status(path)); }

// A device node of our own (never the system's /dev/null or /dev/full); empty when this user may not make one.
std::string device_node(const std::string& dir, const char* name, unsigned minor) {
  const std::string path = dir + "/" + name;
  if (mknod(path.c_str(), S_IFCHR | 0666, makedev(1, minor)) != 0) return "";
  return path;
}

TEST(OutputFile, NewAndReplacedFilesAppearWhole) {
  const std::string dir = test_dir();
  write_text_file(dir + "/a.json", "one\n");
  EXPECT_EQ(read_all(dir + "/a.json"), "one\n");
  write_text_file(dir + "/a.json", "two\n");
  EXPECT_EQ(read_all(dir + "/a.json"), "two\n");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFile, ReplacementKeepsThePermissions) {
  const std::string dir = test_dir();
  write_file(dir + "/private.json", "old");
  fs::permissions(dir + "/private.json", fs::perms::owner_read | fs::perms::owner_write);
  write_text_file(dir + "/private.json", "new");
  EXPECT_EQ(fs::status(dir + "/private.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST(OutputFile, GzipByTheName) {
  const std::string dir = test_dir();
  write_text_file(dir + "/t.txt.gz", "hello");
  const std::string raw = read_all(dir + "/t.txt.gz");
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(raw[1]), 0x8b);
}

TEST(OutputFile, LinksAreFollowedAndStayLinks) {
  const std::string dir = test_dir();
  fs::create_directories(dir + "/real");
  write_file(dir + "/real/target.json", "old");
  fs::create_symlink("real/target.json", dir + "/link1");  // relative, resolved from the link's folder
  fs::create_symlink(dir + "/link1", dir + "/link2");      // a chain
  write_text_file(dir + "/link2", "new");
  EXPECT_TRUE(is_link(dir + "/link1"));
  EXPECT_TRUE(is_link(dir + "/link2"));
  EXPECT_EQ(read_all(dir + "/real/target.json"), "new");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFile, DanglingLinkCreatesItsTarget) {
  const std::string dir = test_dir();
  fs::create_directories(dir + "/real");
  fs::create_symlink("real/new.json", dir + "/link");
  write_text_file(dir + "/link", "content");
  EXPECT_TRUE(is_link(dir + "/link"));
  EXPECT_EQ(read_all(dir + "/real/new.json"), "content");
}

TEST(OutputFile, LinkLoopIsAnError) {
  const std::string dir = test_dir();
  fs::create_symlink("b", dir + "/a");
  fs::create_symlink("a", dir + "/b");
  const std::string e = user_error([&] { write_text_file(dir + "/a", "x"); });
  EXPECT_NE(e.find(dir + "/a: cannot write: too many levels of symbolic links"), std::string::npos) << e;
}

TEST(OutputFile, ReadOnlyFileIsRefusedAndKept) {
  const std::string dir = test_dir();
  write_file(dir + "/ro.json", "keep");
  fs::permissions(dir + "/ro.json", fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  EXPECT_EQ(user_error([&] { write_text_file(dir + "/ro.json", "new"); }),
            dir + "/ro.json: is read-only: not replaced");
  EXPECT_EQ(user_error([&] { check_output_file(dir + "/ro.json"); }), dir + "/ro.json: is read-only: not replaced");
  EXPECT_EQ(read_all(dir + "/ro.json"), "keep");
  fs::create_symlink("ro.json", dir + "/link");
  EXPECT_EQ(user_error([&] { check_output_file(dir + "/link"); }),
            dir + "/link (a link to " + dir + "/ro.json): is read-only: not replaced");
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFile, FolderProblemsAreNamed) {
  const std::string dir = test_dir();
  EXPECT_EQ(user_error([&] { check_output_file(dir + "/no/such/x.json"); }),
            dir + "/no/such/x.json: folder " + dir + "/no/such does not exist");
  EXPECT_EQ(user_error([&] { write_text_file(dir, "x"); }), dir + ": is a folder");
  fs::create_directories(dir + "/ro");
  fs::permissions(dir + "/ro", fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_EQ(user_error([&] { check_output_file(dir + "/ro/x.json"); }),
            dir + "/ro/x.json: folder " + dir + "/ro is not writable");
  EXPECT_EQ(user_error([&] { write_text_file(dir + "/ro/x.json", "x"); }),
            dir + "/ro/x.json: folder " + dir + "/ro is not writable");
  fs::permissions(dir + "/ro", fs::perms::owner_all);
  EXPECT_TRUE(fs::is_empty(dir + "/ro"));
  EXPECT_EQ(user_error([&] { check_output_file("-"); }), "");
}

TEST(OutputFile, DevicesAreWrittenInPlace) {
  const std::string dir = test_dir();
  const std::string null = device_node(dir, "null", 3);
  if (null.empty()) GTEST_SKIP() << "cannot make a device node here (mknod needs root): skipped";
  EXPECT_EQ(user_error([&] { check_output_file(null); }), "");
  write_text_file(null, "x");
  EXPECT_TRUE(is_char_device(null));
  fs::create_symlink("null", dir + "/null-link");
  write_text_file(dir + "/null-link", "through a link");
  EXPECT_TRUE(is_char_device(null));
  EXPECT_TRUE(is_link(dir + "/null-link"));
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFile, FullDeviceGivesTheReason) {
  const std::string dir = test_dir();
  const std::string full = device_node(dir, "full", 7);
  if (full.empty()) GTEST_SKIP() << "cannot make a device node here (mknod needs root): skipped";
  EXPECT_EQ(user_error([&] { write_text_file(full, "x"); }), full + ": cannot write: No space left on device");
  // gzip streams to a device too, and its failure has the same reason.
  fs::create_symlink("full", dir + "/full.json.gz");
  const std::string e = user_error([&] { write_text_file(dir + "/full.json.gz", std::string(1 << 20, 'x')); });
  EXPECT_EQ(e, dir + "/full.json.gz: cannot write: No space left on device");
  EXPECT_TRUE(is_char_device(full));
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFile, WriteEtStopsAtTheFirstFailure) {
  const std::string dir = test_dir();
  const std::string full = device_node(dir, "full", 7);
  if (full.empty()) GTEST_SKIP() << "cannot make a device node here (mknod needs root): skipped";
  SyntheticSpec s;
  s.layers = 200;
  s.iterations = 4;
  const Trace t = synthetic_trace(s);
  EXPECT_EQ(user_error([&] { write_et(t, full); }), full + ": cannot write: No space left on device");
  EXPECT_TRUE(is_char_device(full));
}

TEST(OutputFile, FifoIsWrittenInPlace) {
  const std::string dir = test_dir();
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_all(fifo); });
  write_text_file(fifo, "through the pipe\n");
  reader.join();
  EXPECT_EQ(got, "through the pipe\n");
  struct stat st = {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(OutputFile, StdoutIsDash) {
  testing::internal::CaptureStdout();
  write_text_file("-", "to standard output\n");
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "to standard output\n");
}

TEST(OutputFile, UncommittedTemporaryIsRemoved) {
  const std::string dir = test_dir();
  write_file(dir + "/out.json", "old");
  {
    OutputFile f(dir + "/out.json");
    f.write("partial");
    EXPECT_EQ(temporaries(dir).size(), 1u);
  }
  EXPECT_TRUE(temporaries(dir).empty());
  EXPECT_EQ(read_all(dir + "/out.json"), "old");
}

// Runs `body` in a child process and returns its wait status.
template <typename F>
int in_child(F&& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      _exit(9);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

void expect_killed_by(int status, int sig) {
  EXPECT_TRUE(WIFSIGNALED(status)) << "status " << status;
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), sig);
  }
}

TEST(OutputFile, SignalRemovesTheTemporaryAndKills) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    const std::string dir = test_dir() + "/" + std::to_string(sig);
    fs::create_directories(dir);
    write_file(dir + "/out.json", "old");
    const int status = in_child([&] {
      OutputFile f(dir + "/out.json");
      f.write("partial");
      raise(sig);
      _exit(5);  // not reached: the signal kills
    });
    expect_killed_by(status, sig);
    EXPECT_TRUE(temporaries(dir).empty()) << sig;
    EXPECT_EQ(read_all(dir + "/out.json"), "old") << sig;
  }
}

TEST(OutputFile, SignalRemovesARegisteredFolder) {
  const std::string dir = test_dir();
  const std::string tmp = dir + "/bundle.tmp-1";
  const int status = in_child([&] {
    fs::create_directories(tmp + "/traces/deeper");
    for (int i = 0; i < 300; ++i) write_file(tmp + "/traces/role-" + std::to_string(i) + ".json", "x");
    write_file(tmp + "/traces/deeper/f", "x");
    write_file(tmp + "/manifest.yaml", "x");
    const RemovedOnSignal guard(tmp);
    raise(SIGTERM);
    _exit(5);
  });
  expect_killed_by(status, SIGTERM);
  EXPECT_FALSE(fs::exists(tmp));
}

// A watchdog ends the process with _Exit, which runs no destructor: it removes the registered paths first.
TEST(OutputFile, RegisteredPathsAreRemovedBeforeAnExitWithoutUnwinding) {
  const std::string dir = test_dir();
  const std::string tmp = dir + "/results.json.tmp-7";
  const int status = in_child([&] {
    write_file(tmp, "partial");
    const RemovedOnSignal guard(tmp);
    remove_registered_now();
    _exit(124);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 124);
  EXPECT_FALSE(fs::exists(tmp));
}

void exit_42(int) { _exit(42); }

TEST(OutputFile, SignalChainsToThePreviousHandler) {
  const std::string dir = test_dir();
  const int status = in_child([&] {
    signal(SIGTERM, exit_42);
    {
      OutputFile f(dir + "/out.json");
      f.write("partial");
      raise(SIGTERM);
    }
    _exit(5);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
  EXPECT_TRUE(temporaries(dir).empty());
}

TEST(OutputFile, HandlersOnlyWhileSomethingIsRegistered) {
  const int status = in_child([] {
    signal(SIGHUP, SIG_IGN);
    struct sigaction before = {}, during = {}, after = {};
    sigaction(SIGTERM, nullptr, &before);
    {
      const RemovedOnSignal guard("/nonexistent/x");
      sigaction(SIGTERM, nullptr, &during);
      raise(SIGHUP);  // still ignored: nohup keeps working
    }
    sigaction(SIGTERM, nullptr, &after);
    const bool ok = before.sa_handler == SIG_DFL && (during.sa_flags & SA_SIGINFO) && after.sa_handler == SIG_DFL &&
                    !(after.sa_flags & SA_SIGINFO);
    _exit(ok ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// remove_tree (the test binaries' clean-up and analyze --measure's work folder): everything under the folder goes,
// a link goes as a link and what it points to stays, a missing path is nothing to do.
TEST(RemoveTree, RemovesNestedFoldersAndLinksButNotWhatTheyPointTo) {
  const fs::path dir = test_dir(), keep = dir / "kept", tree = dir / "tree";
  fs::create_directories(tree / "a" / "b" / "c");
  fs::create_directories(keep);
  write_file((keep / "file").string(), "kept");
  write_file((tree / "a" / "b" / "c" / "deep").string(), "x");
  write_file((tree / "top").string(), "x");
  fs::create_directory_symlink(keep, tree / "a" / "link");
  fs::create_symlink(tree / "nowhere", tree / "dangling");
  EXPECT_TRUE(remove_tree(tree.string()));
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_TRUE(fs::exists(keep / "file")) << "a link is removed, never followed";
  EXPECT_TRUE(remove_tree((dir / "missing").string())) << "nothing to remove is not a failure";
  write_file((dir / "plain").string(), "x");
  EXPECT_TRUE(remove_tree((dir / "plain").string())) << "a file alone";
  EXPECT_FALSE(fs::exists(dir / "plain"));
}

}  // namespace
}  // namespace reprise
