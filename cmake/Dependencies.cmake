# Finds what Reprise builds against and says what was found. LibTorch, CUDA and NCCL are optional here:
# the trace model and its tools build without them.
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(simdjson REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Boost 1.70 REQUIRED COMPONENTS program_options)
find_package(yaml-cpp REQUIRED)
find_package(OpenSSL REQUIRED)  # libcrypto: bundle hashes (SHA-256)
find_package(Protobuf QUIET)    # the Chakra export (predict/chakra.cmake); optional

# LibTorch: Debian's libtorch-dev, or a torch 2.x installation via CMAKE_PREFIX_PATH / Torch_DIR
# (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)').
find_package(Torch QUIET)
if(Torch_FOUND)
  # A CUDA build of LibTorch exports torch_cuda (or c10_cuda); replay then times with CUDA events.
  if(TARGET torch_cuda OR TARGET c10_cuda OR "${TORCH_LIBRARIES}" MATCHES "c10_cuda")
    set(REPRISE_TORCH_CUDA ON)
  else()
    set(REPRISE_TORCH_CUDA OFF)
  endif()
  message(STATUS "LibTorch: found ${Torch_VERSION} (${TORCH_INSTALL_PREFIX}), CUDA ${REPRISE_TORCH_CUDA}")
else()
  message(STATUS "LibTorch: not found (replay and live capture are not built)")
endif()

find_package(MPI QUIET COMPONENTS C)
if(MPI_C_FOUND)
  message(STATUS "MPI: found (MPI ${MPI_C_VERSION}, ${MPI_C_LIBRARIES})")
else()
  message(STATUS "MPI: not found")
endif()

# CUDA and NCCL: compile and link where present; they run only on a GPU machine.
find_package(CUDAToolkit QUIET)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 /usr/local/cuda/lib ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
if(CUDAToolkit_FOUND)
  message(STATUS "CUDA: found ${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR})")
else()
  message(STATUS "CUDA: not found")
endif()
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(REPRISE_HAVE_NCCL ON)
  message(STATUS "NCCL: found ${NCCL_LIBRARY}")
else()
  set(REPRISE_HAVE_NCCL OFF)
  message(STATUS "NCCL: not found")
endif()
if(yaml-cpp_FOUND)
  message(STATUS "yaml-cpp: found")
endif()
