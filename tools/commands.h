// Subcommands of flotilla-tool. Each lives in its own file (synth_main.cc,
// and pack / doctor from their owners) and is listed in the dispatch table
// in main.cc. A subcommand receives argv with argv[0] = its own name and
// returns the process exit code.
#ifndef FLOTILLA_TOOLS_COMMANDS_H_
#define FLOTILLA_TOOLS_COMMANDS_H_

namespace flotilla::tools {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // runtime failure (I/O, bad files)
inline constexpr int kExitUsage = 2;    // bad command line

// flotilla-tool synth: writes a random-weight K3 checkpoint.
int RunSynth(int argc, char** argv);
// flotilla-tool pack: writes the trunk file and pack manifest (pack.h).
int RunPack(int argc, char** argv);
// flotilla-tool doctor: machine checks and per-model predictions (doctor.h).
int RunDoctor(int argc, char** argv);

}  // namespace flotilla::tools

#endif  // FLOTILLA_TOOLS_COMMANDS_H_
