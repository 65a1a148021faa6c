# The Chakra export (src/chakra/): the dependency graph is plain C++; writing and reading the protobuf files needs
# Debian's protobuf (libprotobuf-dev, protobuf-compiler). Without it the export still builds, and writing or reading
# a file throws UserError ("built without protobuf").
file(GLOB REPRISE_CHAKRA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/chakra/*.cc)
target_sources(reprise_predict PRIVATE ${REPRISE_CHAKRA_SOURCES})

# Protobuf is found in cmake/Dependencies.cmake, at the top level, so its imported target is seen everywhere (LibTorch's
# config may import it there too).
if(Protobuf_FOUND AND Protobuf_PROTOC_EXECUTABLE)
  set(chakra_proto ${CMAKE_CURRENT_SOURCE_DIR}/src/chakra/et_def.proto)
  set(chakra_gen ${CMAKE_CURRENT_BINARY_DIR}/chakra_proto)
  file(MAKE_DIRECTORY ${chakra_gen})
  add_custom_command(
    OUTPUT ${chakra_gen}/et_def.pb.cc ${chakra_gen}/et_def.pb.h
    COMMAND ${Protobuf_PROTOC_EXECUTABLE} --cpp_out=${chakra_gen} -I${CMAKE_CURRENT_SOURCE_DIR}/src/chakra ${chakra_proto}
    DEPENDS ${chakra_proto}
    COMMENT "protoc: Chakra et_def.proto"
    VERBATIM)
  target_sources(reprise_predict PRIVATE ${chakra_gen}/et_def.pb.cc)
  # Generated code: its warnings are protoc's, not ours.
  set_source_files_properties(${chakra_gen}/et_def.pb.cc PROPERTIES COMPILE_OPTIONS "-w")
  target_include_directories(reprise_predict SYSTEM PRIVATE ${chakra_gen} ${Protobuf_INCLUDE_DIRS})
  target_link_libraries(reprise_predict PRIVATE protobuf::libprotobuf)
  target_compile_definitions(reprise_predict PRIVATE REPRISE_HAVE_PROTOBUF=1)
  set(REPRISE_HAVE_PROTOBUF ON CACHE INTERNAL "")
  message(STATUS "Reprise: Chakra export with protobuf ${Protobuf_VERSION}")
else()
  set(REPRISE_HAVE_PROTOBUF OFF CACHE INTERNAL "")
  message(STATUS "Reprise: Chakra export without protobuf (install libprotobuf-dev protobuf-compiler)")
endif()
