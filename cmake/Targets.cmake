# How Reprise's libraries are declared: installed and exported (find_package(Reprise) gives Reprise::trace,
# Reprise::capture, ...), and, for those that include LibTorch, built the way LibTorch's headers need.

# The version every command reports comes from project(): build/include/reprise/version.h.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${PROJECT_BINARY_DIR}/include/reprise/version.h @ONLY)

set(REPRISE_EXPORTED_TARGETS "" CACHE INTERNAL "")

# reprise_install(TARGET HEADER_DIR): installs the library and its public headers, and exports it.
function(reprise_install target header_dir)
  install(TARGETS ${target} EXPORT RepriseTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  string(REGEX REPLACE "^include/" "" installed_dir ${header_dir})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${header_dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${installed_dir}
          FILES_MATCHING PATTERN "*.h")
  # Installed as Reprise::<name without the reprise_ prefix>, as the ALIAS targets name them in the build.
  string(REPLACE "reprise_" "" short ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${short})
  # A sanitizer build's libraries call the sanitizers' runtimes: what links them installed must link those too.
  if(REPRISE_SANITIZE)
    target_link_options(${target} INTERFACE $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
  endif()
  set_property(GLOBAL APPEND PROPERTY REPRISE_INSTALLED_LIBRARIES ${target})
endfunction()

# reprise_torch_target(TARGET): a target that includes LibTorch headers. RecordFunction's debug-only asserts throw in
# every observer callback unless NDEBUG is defined, so torch code always builds with it; it stays private so it never
# reaches a consumer's own code. REPRISE_TORCH_CUDA tells CUDA builds of LibTorch apart.
function(reprise_torch_target target)
  target_compile_definitions(${target} PRIVATE NDEBUG)
  if(REPRISE_TORCH_CUDA)
    target_compile_definitions(${target} PRIVATE REPRISE_TORCH_CUDA=1)
  endif()
endfunction()

# The package: lib/cmake/Reprise/{RepriseConfig,RepriseConfigVersion,RepriseTargets}.cmake.
function(reprise_install_package)
  include(CMakePackageConfigHelpers)
  install(FILES ${PROJECT_BINARY_DIR}/include/reprise/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/reprise)
  install(EXPORT RepriseTargets NAMESPACE Reprise:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Reprise)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/RepriseConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/RepriseConfig.cmake
                                INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Reprise)
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/RepriseConfigVersion.cmake COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/RepriseConfig.cmake ${PROJECT_BINARY_DIR}/RepriseConfigVersion.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Reprise)
endfunction()
